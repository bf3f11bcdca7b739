/* The measured GEMM algorithms kept across runs (gemm_algos.h). */
#include "gemm_algos.h"
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "../base/hash.h"
#include "cache.h"

int gemm_algos_path(char *out, size_t n, const char *identity) {
  const char *dir = cache_dir();
  if (!dir) return 0;
  int w = snprintf(out, n, "%s/gemm-algos-%016" PRIx64 ".txt", dir, hash_str(0x6c617468656c7431ULL, identity));
  return w > 0 && (size_t)w < n;
}

static int parse_line(const char *line, GemmAlgoRecord *r) {
  long long m, n, k;
  int at = 0;
  if (sscanf(line, "%lld %lld %lld%n", &m, &n, &k, &at) != 3 || m < 1 || n < 1 || k < 1) return 0;
  for (int i = 0; i < 8; i++) {
    int used = 0;
    if (line[at] != ' ' || sscanf(line + at + 1, "%16" SCNx64 "%n", &r->algo[i], &used) != 1 || used != 16) return 0;
    at += 1 + used;
  }
  if (line[at] != '\n' && line[at] != '\0') return 0;
  r->m = m, r->n = n, r->k = k;
  return 1;
}

int gemm_algos_load(const char *path, GemmAlgoRecord *recs, int cap, int *bad) {
  *bad = 0;
  FILE *f = fopen(path, "r");
  if (!f) return 0;
  char line[512];
  int n = 0;
  while (fgets(line, sizeof line, f)) {
    size_t len = strlen(line);
    if (len == sizeof line - 1 && line[len - 1] != '\n') { /* overlong: skip the rest of it */
      int ch;
      while ((ch = fgetc(f)) != EOF && ch != '\n') {}
      (*bad)++;
      continue;
    }
    GemmAlgoRecord r;
    if (line[0] == '\n') continue;
    if (!parse_line(line, &r)) (*bad)++;
    else if (n < cap) recs[n++] = r;
  }
  fclose(f);
  return n;
}

int gemm_algos_append(const char *path, const GemmAlgoRecord *r) {
  char line[256];
  int len = snprintf(line, sizeof line, "%lld %lld %lld", (long long)r->m, (long long)r->n, (long long)r->k);
  for (int i = 0; i < 8 && len > 0 && (size_t)len < sizeof line; i++)
    len += snprintf(line + len, sizeof line - (size_t)len, " %016" PRIx64, r->algo[i]);
  if (len <= 0 || (size_t)len + 2 >= sizeof line) return 0;
  line[len++] = '\n';
  int fd = open(path, O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return 0;
  /* after a line cut short (a full disk, a crash) the record starts a line of its own */
  char last = '\n';
  off_t end = lseek(fd, 0, SEEK_END);
  if (end > 0 && (lseek(fd, end - 1, SEEK_SET) < 0 || read(fd, &last, 1) != 1)) last = '\n';
  if (last != '\n') {
    memmove(line + 1, line, (size_t)len);
    line[0] = '\n';
    len++;
  }
  int ok = write(fd, line, (size_t)len) == (ssize_t)len;
  return close(fd) == 0 && ok;
}
