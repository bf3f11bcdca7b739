/* Running one piece of tuning work in a child process under a watchdog, so a candidate that crashes (a bad
 * kernel, a device fault) or hangs is recorded and tuning goes on. */
#ifndef LATHE_TUNE_CHILD_H
#define LATHE_TUNE_CHILD_H
#include <stddef.h>
#include "../base/strbuf.h"

typedef enum ChildStatus {
  CHILD_OK,      /* fn returned 1; out holds what it wrote */
  CHILD_FAILED,  /* fn returned 0; out holds its message */
  CHILD_FAULT,   /* it died (a signal, or exited without finishing); why says how */
  CHILD_TIMEOUT, /* still running after timeout_s: killed */
} ChildStatus;

/* Forks; the child runs fn(ctx, out) and sends out back through a pipe, then exits at once (_exit: no
 * atexit handlers, no flushing of the parent's stdio buffers). The parent waits at most timeout_s (> 0). */
ChildStatus tune_run_child(int (*fn)(void *ctx, StrBuf *out), void *ctx, double timeout_s, StrBuf *out, char *why,
                           size_t nwhy);
#endif
