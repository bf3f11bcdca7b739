/* Host programs that tests write, build and run (test_quant_kernels, test_qgemv_host): the source in a fresh
 * temporary directory, built with a given compiler and run there. Static inline, so a test that does not use a
 * helper gets no warning. */
#ifndef LATHE_HOST_PROG_TESTUTIL_H
#define LATHE_HOST_PROG_TESTUTIL_H
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include "testutil.h"

/* A host program's source in a fresh temporary directory, built and run there. */
typedef struct HostProg {
  char dir[32], src[96], exe[96];
} HostProg;

static inline void host_prog_write(HostProg *p, const char *file, const char *text) {
  snprintf(p->dir, sizeof p->dir, "/tmp/lathe-hostprog-XXXXXX");
  assert_non_null(mkdtemp(p->dir));
  snprintf(p->src, sizeof p->src, "%s/%s", p->dir, file);
  snprintf(p->exe, sizeof p->exe, "%s/prog", p->dir);
  FILE *f = fopen(p->src, "w");
  assert_non_null(f);
  fputs(text, f);
  fclose(f);
}

/* Builds the program with compile (a compiler and its flags), runs it, its output to out (NULL: the test's own
 * output), removes the executable; the shell's status. */
static inline int host_prog_run(const HostProg *p, const char *compile, const char *out) {
  char cmd[800];
  snprintf(cmd, sizeof cmd, "%s -o %s %s -lm 2>&1 && %s%s%s", compile, p->exe, p->src, p->exe, out ? " > " : "",
           out ? out : "");
  int rc = system(cmd);
  unlink(p->exe);
  return rc;
}

static inline void host_prog_remove(const HostProg *p) {
  unlink(p->src);
  rmdir(p->dir);
}

#endif
