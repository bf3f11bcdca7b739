/* On-disk compile cache location and entry names. */
#include "cache.h"
#include "../base/settings.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* mkdir -p: creates every missing component of path with mode 0755. */
static int mkdir_p(char *path) {
  for (char *p = path + 1; *p; p++) {
    if (*p != '/') continue;
    *p = '\0';
    int ok = mkdir(path, 0755) == 0 || errno == EEXIST;
    *p = '/';
    if (!ok) return 0;
  }
  if (mkdir(path, 0755) != 0 && errno != EEXIST) return 0;
  struct stat st;
  return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

const char *cache_dir(void) {
  /* Per thread, recomputed on every call so a changed environment (tests) is honoured. */
  static _Thread_local char dir[4096];
  if (!settings_cache_root(dir, sizeof dir)) return NULL;
  return mkdir_p(dir) ? dir : NULL;
}

void cache_path(char *out, size_t n, uint64_t key, const char *suffix) {
  const char *dir = cache_dir();
  snprintf(out, n, "%s/%016" PRIx64 "%s", dir ? dir : ".", key, suffix ? suffix : "");
}
