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
#include <sys/socket.h>
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

/* ---- the serving child ---- */

static int read_exact(int fd, void *p, size_t n) {
  char *at = p;
  while (n) {
    ssize_t r = read(fd, at, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return 0;
    at += r, n -= (size_t)r;
  }
  return 1;
}

static void serve_loop(int fd, TuneServeFn serve, void *ctx) {
  for (;;) {
    uint64_t len;
    if (!read_exact(fd, &len, sizeof len)) _exit(0); /* the tuner closed the socket: done */
    char *req = malloc(len ? len : 1);
    if (!req || !read_exact(fd, req, len)) _exit(3);
    StrBuf b = {0};
    int r = serve(ctx, req, len, &b);
    char flag = r > 0 ? 'K' : r == 0 ? 'F' : 'X';
    uint64_t out_len = b.len;
    write_all(fd, &flag, 1);
    write_all(fd, (const char *)&out_len, sizeof out_len);
    if (b.len) write_all(fd, b.data, b.len);
    write_all(fd, "E", 1);
    free(req);
    sb_free(&b);
    if (r < 0) _exit(0);
  }
}

int tune_worker_start(TuneWorker *w, TuneServeFn serve, void *ctx, char *why, size_t nwhy) {
  int sv[2];
  memset(w, 0, sizeof *w);
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv)) {
    snprintf(why, nwhy, "socketpair: %s", strerror(errno));
    return 0;
  }
  fflush(NULL);
  pid_t pid = fork();
  if (pid < 0) {
    snprintf(why, nwhy, "fork: %s", strerror(errno));
    close(sv[0]), close(sv[1]);
    return 0;
  }
  if (pid == 0) {
    close(sv[0]);
    serve_loop(sv[1], serve, ctx);
    _exit(0);
  }
  close(sv[1]);
  w->pid = (int)pid;
  w->fd = sv[0];
  return 1;
}

static void reap(TuneWorker *w, int kill_it) {
  if (!w->pid) return;
  if (kill_it) kill((pid_t)w->pid, SIGKILL);
  close(w->fd);
  int status;
  while (waitpid((pid_t)w->pid, &status, 0) < 0 && errno == EINTR) {}
  w->pid = 0;
  w->fd = -1;
}

void tune_worker_stop(TuneWorker *w) {
  if (!w->pid) return;
  shutdown(w->fd, SHUT_WR); /* the child reads the end and exits */
  const double deadline = now_ms() + 5000;
  char c;
  for (;;) { /* give it a moment to exit by itself (its device context is released cleanly) */
    double left = deadline - now_ms();
    struct pollfd pf = {w->fd, POLLIN, 0};
    if (left <= 0 || poll(&pf, 1, (int)left + 1) == 0) break;
    ssize_t r = read(w->fd, &c, 1);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
  }
  reap(w, 1);
}

/* Reads n bytes before the deadline: 1, or 0 (the child's end closed), -1 (timeout). */
static int read_until(int fd, void *p, size_t n, double deadline) {
  char *at = p;
  while (n) {
    double left = deadline - now_ms();
    if (left <= 0) return -1;
    struct pollfd pf = {fd, POLLIN, 0};
    int r = poll(&pf, 1, left > 1e9 ? 1000000000 : (int)left + 1);
    if (r < 0 && errno == EINTR) continue;
    if (r == 0) continue;
    ssize_t got = read(fd, at, n);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return 0;
    at += got, n -= (size_t)got;
  }
  return 1;
}

ChildStatus tune_worker_call(TuneWorker *w, const void *req, size_t n, double timeout_s, StrBuf *out, char *why,
                             size_t nwhy) {
  why[0] = 0;
  if (!w->pid) {
    snprintf(why, nwhy, "the measuring process is not running");
    return CHILD_FAULT;
  }
  uint64_t len = n;
  const char *parts[2] = {(const char *)&len, req};
  size_t sizes[2] = {sizeof len, n};
  for (int i = 0; i < 2; i++)
    for (size_t at = 0; at < sizes[i];) {
      ssize_t r = send(w->fd, parts[i] + at, sizes[i] - at, MSG_NOSIGNAL);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) {
        snprintf(why, nwhy, "the measuring process is gone (%s)", r < 0 ? strerror(errno) : "closed");
        reap(w, 1);
        return CHILD_FAULT;
      }
      at += (size_t)r;
    }
  w->served++;
  const double deadline = now_ms() + timeout_s * 1000;
  char flag = 0, end = 0;
  uint64_t out_len = 0;
  int r = read_until(w->fd, &flag, 1, deadline);
  if (r > 0) r = read_until(w->fd, &out_len, sizeof out_len, deadline);
  char *body = NULL;
  if (r > 0 && out_len > ((uint64_t)1 << 40)) r = 0; /* not a frame of ours */
  if (r > 0 && !(body = malloc(out_len ? out_len : 1))) r = 0;
  if (r > 0) r = read_until(w->fd, body, out_len, deadline);
  if (r > 0) r = read_until(w->fd, &end, 1, deadline);
  if (r < 0) {
    snprintf(why, nwhy, "still running after %.0f s: killed", timeout_s);
    free(body);
    reap(w, 1);
    return CHILD_TIMEOUT;
  }
  if (r == 0 || end != 'E' || (flag != 'K' && flag != 'F' && flag != 'X')) {
    int status = 0;
    close(w->fd);
    while (waitpid((pid_t)w->pid, &status, 0) < 0 && errno == EINTR) {}
    w->pid = 0;
    if (WIFSIGNALED(status))
      snprintf(why, nwhy, "killed by signal %d (%s)", WTERMSIG(status), strsignal(WTERMSIG(status)));
    else snprintf(why, nwhy, "exited with status %d before finishing", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    free(body);
    return CHILD_FAULT;
  }
  sb_putn(out, body, (size_t)out_len);
  free(body);
  if (flag == 'X') reap(w, 0);
  return flag == 'K' ? CHILD_OK : CHILD_FAILED;
}
