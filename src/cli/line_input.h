/* The chat's input lines: libedit's line editing and history when stdin is a terminal, plain getline
 * otherwise (a pipe, a file). */
#ifndef LATHE_LINE_INPUT_H
#define LATHE_LINE_INPUT_H
#include <stddef.h>

typedef struct LineInput {
  int edit;   /* libedit in use */
  char *line; /* the last line returned (malloc'ed) */
  size_t cap; /* getline's buffer size */
} LineInput;

void line_input_open(LineInput *in);
/* The next line without its line ending, valid until the next call; NULL at the end of the input or
 * when the read was interrupted (a signal; interrupt_flag says whether it was Ctrl-C). The prompt is
 * shown only when editing. Non-empty lines go into the history. */
const char *line_input_read(LineInput *in, const char *prompt);
int line_input_editing(const LineInput *in);
void line_input_close(LineInput *in);
#endif
