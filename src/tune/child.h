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

/* A child that serves many requests (a tuner's candidates) so each does not pay the device's start-up: a
 * socket pair carries length-prefixed requests to it and framed replies back. serve returns 1 (ok: the reply is
 * `out`), 0 (failed: `out` is the message; the child goes on) or -1 (failed, and the child exits after
 * replying: the device may be left unusable). */
typedef int (*TuneServeFn)(void *ctx, const char *req, size_t n, StrBuf *out);
typedef struct TuneWorker {
  int pid; /* 0: not running */
  int fd;
  int served;
} TuneWorker;

/* Forks the child (it inherits everything ctx points to as it is now). 0 with why on failure. */
int tune_worker_start(TuneWorker *w, TuneServeFn serve, void *ctx, char *why, size_t nwhy);
/* One request; the reply within timeout_s. CHILD_FAULT (it died) and CHILD_TIMEOUT (killed) leave the worker
 * stopped, as does a CHILD_FAILED the child ended on; start another to go on. */
ChildStatus tune_worker_call(TuneWorker *w, const void *req, size_t n, double timeout_s, StrBuf *out, char *why,
                             size_t nwhy);
/* Ends the child (closing its socket; killed if it does not exit at once) and reaps it. */
void tune_worker_stop(TuneWorker *w);
#endif
