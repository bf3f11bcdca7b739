/* The child runner: a pipe carries a one-byte result flag then fn's bytes; a child that dies before its
 * last byte is a fault, whatever its exit status says (a sanitizer's report exits 1). */
#include "child.h"
#include <errno.h>
#include <stdint.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "../base/clock.h"

static void write_all(int fd, const char *p, size_t n) {
  while (n) {
    ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) _exit(3);
    p += w, n -= (size_t)w;
  }
}

ChildStatus tune_run_child(int (*fn)(void *ctx, StrBuf *out), void *ctx, double timeout_s, StrBuf *out, char *why,
                           size_t nwhy) {
  int fds[2];
  why[0] = 0;
  if (pipe(fds)) {
    snprintf(why, nwhy, "pipe: %s", strerror(errno));
    return CHILD_FAULT;
  }
  fflush(NULL); /* nothing buffered is written twice */
  pid_t pid = fork();
  if (pid < 0) {
    snprintf(why, nwhy, "fork: %s", strerror(errno));
    close(fds[0]), close(fds[1]);
    return CHILD_FAULT;
  }
  if (pid == 0) {
    close(fds[0]);
    StrBuf b = {0};
    int ok = fn(ctx, &b);
    /* frame: flag, 8-byte length, bytes, end mark */
    char flag = ok ? 'K' : 'F';
    uint64_t len = b.len;
    write_all(fds[1], &flag, 1);
    write_all(fds[1], (const char *)&len, sizeof len);
    if (b.len) write_all(fds[1], b.data, b.len);
    write_all(fds[1], "E", 1);
    close(fds[1]);
    _exit(0);
  }
  close(fds[1]);
  StrBuf got = {0};
  const double deadline = now_ms() + timeout_s * 1000;
  int timed_out = 0;
  char chunk[65536];
  for (;;) {
    double left = deadline - now_ms();
    if (left <= 0) {
      timed_out = 1;
      break;
    }
    struct pollfd pf = {fds[0], POLLIN, 0};
    int r = poll(&pf, 1, left > 1e9 ? 1000000000 : (int)left + 1);
    if (r < 0 && errno == EINTR) continue;
    if (r == 0) continue; /* the deadline check above ends it */
    ssize_t n = read(fds[0], chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    sb_putn(&got, chunk, (size_t)n);
  }
  close(fds[0]);
  if (timed_out) kill(pid, SIGKILL);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
  ChildStatus rc;
  uint64_t len = 0;
  if (got.len >= 1 + sizeof len) memcpy(&len, got.data + 1, sizeof len);
  int framed = got.len >= 1 + sizeof len && len == got.len - 2 - sizeof len && got.data[got.len - 1] == 'E';
  if (timed_out) {
    snprintf(why, nwhy, "still running after %.0f s: killed", timeout_s);
    rc = CHILD_TIMEOUT;
  } else if (!framed || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    if (WIFSIGNALED(status))
      snprintf(why, nwhy, "killed by signal %d (%s)", WTERMSIG(status), strsignal(WTERMSIG(status)));
    else snprintf(why, nwhy, "exited with status %d before finishing", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    rc = CHILD_FAULT;
  } else {
    rc = got.data[0] == 'K' ? CHILD_OK : CHILD_FAILED;
    sb_putn(out, got.data + 1 + sizeof len, (size_t)len);
  }
  sb_free(&got);
  return rc;
}
