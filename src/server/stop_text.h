/* Stop strings are not part of the returned text (as OpenAI and vLLM return it). The engine stops when the
 * decoded text contains one but leaves it in; the server cuts the text at the earliest stop string and, when
 * streaming, holds back a tail that could still grow into one until the next tokens settle it. */
#ifndef LATHE_SERVER_STOP_TEXT_H
#define LATHE_SERVER_STOP_TEXT_H
#include <stddef.h>

/* The offset of the earliest occurrence of any stop string in text[0..len), or -1 when there is none. */
long stop_find(const char *text, size_t len, const char *const *stop, int nstop);
/* How much of text[0..len) can be sent now: all but the longest tail that is a proper prefix of a stop
 * string (the text has no whole stop string: stop_find said so). */
size_t stop_safe_len(const char *text, size_t len, const char *const *stop, int nstop);
#endif
