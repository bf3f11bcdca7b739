/* On-disk compile cache: location, entry names, and verified entries (see cache.h for the format). */
#include "cache.h"
#include "../base/settings.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../base/hash.h"
#include "../base/mem.h"
#include "../base/notice.h"

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

static _Thread_local char dir_failure[4200];

const char *cache_dir_failure(void) { return dir_failure[0] ? dir_failure : "no cache directory"; }

const char *cache_dir(void) {
  /* Per thread, recomputed on every call so a changed environment (tests) is honoured. */
  static _Thread_local char dir[4096];
  dir_failure[0] = '\0';
  if (!settings_cache_root(dir, sizeof dir)) {
    snprintf(dir_failure, sizeof dir_failure,
             "none: neither LATHE_CACHE_DIR, XDG_CACHE_HOME nor HOME is set, or the path is too long");
    return NULL;
  }
  if (mkdir_p(dir)) return dir;
  snprintf(dir_failure, sizeof dir_failure, "%s: cannot be created: %s", dir, strerror(errno));
  return NULL;
}

void cache_path(char *out, size_t n, uint64_t key, const char *suffix) {
  const char *dir = cache_dir();
  snprintf(out, n, "%s/%016" PRIx64 "%s", dir ? dir : ".", key, suffix ? suffix : "");
}

/* ---- the trailer: "LTCACHE1", key, content length, checksum; little-endian 64-bit words ---- */

static const char trailer_magic[8] = {'L', 'T', 'C', 'A', 'C', 'H', 'E', '1'};

static void put_u64(unsigned char *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}

static uint64_t get_u64(const unsigned char *p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; i++) v |= (uint64_t)p[i] << (8 * i);
  return v;
}

/* The checksum covers the key and the length too, so a trailer copied from another entry never fits. */
static uint64_t checksum_finish(uint64_t content_hash, uint64_t key, uint64_t length) {
  return hash_u64(hash_u64(content_hash, key), length);
}

static void make_trailer(unsigned char t[CACHE_TRAILER_BYTES], uint64_t key, uint64_t length, uint64_t content_hash) {
  memcpy(t, trailer_magic, 8);
  put_u64(t + 8, key);
  put_u64(t + 16, length);
  put_u64(t + 24, checksum_finish(content_hash, key, length));
}

static int write_all(int fd, const void *data, size_t n) {
  const char *p = data;
  while (n) {
    ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      if (w == 0) errno = EIO;
      return 0;
    }
    p += w;
    n -= (size_t)w;
  }
  return 1;
}

static int why_errno(char *why, size_t nwhy, const char *what) {
  snprintf(why, nwhy, "%s: %s", what, strerror(errno));
  return 0;
}

/* ---- reading ---- */

static CacheLookup bad(char *why, size_t nwhy, const char *fmt, const char *arg) {
  snprintf(why, nwhy, fmt, arg);
  return CACHE_BAD;
}

CacheLookup cache_load(const char *path, uint64_t key, void **data, size_t *size, char *why, size_t nwhy) {
  *data = NULL;
  *size = 0;
  /* O_NONBLOCK: a FIFO at the path must not hang the open; O_NOFOLLOW: the entry is the file itself. */
  int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return CACHE_MISS;
    if (errno == ELOOP) return bad(why, nwhy, "%s", "a symbolic link");
    return bad(why, nwhy, "cannot open it: %s", strerror(errno));
  }
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    return bad(why, nwhy, "%s", "not a regular file");
  }
  size_t n = (size_t)st.st_size;
  if (st.st_size < CACHE_TRAILER_BYTES || n > CACHE_MAX_ENTRY_BYTES) {
    close(fd);
    char len[32];
    snprintf(len, sizeof len, "%lld", (long long)st.st_size);
    return bad(why, nwhy, "%s bytes: truncated or not an entry", len);
  }
  unsigned char *buf = malloc(n);
  if (!buf) {
    close(fd);
    mem_oom_message(why, nwhy, n, "a cache entry");
    return CACHE_NOMEM;
  }
  size_t got = 0;
  while (got < n) {
    ssize_t r = pread(fd, buf + got, n - got, (off_t)got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    got += (size_t)r;
  }
  close(fd);
  CacheLookup res = CACHE_BAD;
  const unsigned char *t = buf + n - CACHE_TRAILER_BYTES;
  size_t length = n - CACHE_TRAILER_BYTES;
  if (got != n) bad(why, nwhy, "%s", "shorter than its size while reading (truncated)");
  else if (memcmp(t, trailer_magic, 8) != 0)
    bad(why, nwhy, "%s", "no trailer: truncated, overwritten or not written by lathe");
  else if (get_u64(t + 16) != length)
    bad(why, nwhy, "%s", "its length does not match its trailer (truncated or extended)");
  else if (get_u64(t + 8) != key) bad(why, nwhy, "%s", "written for another program (its key differs)");
  else if (get_u64(t + 24) != checksum_finish(hash_bytes(HASH_SEED, buf, length), key, length))
    bad(why, nwhy, "%s", "its content does not match its checksum (overwritten)");
  else res = CACHE_HIT;
  if (res != CACHE_HIT) {
    free(buf);
    return res;
  }
  *data = buf;
  *size = length;
  return CACHE_HIT;
}

/* ---- writing ---- */

int cache_store(const char *dir, const char *path, uint64_t key, const void *data, size_t size, char *why,
                size_t nwhy) {
  char tmp[4200];
  snprintf(tmp, sizeof tmp, "%s/.tmp-%016" PRIx64 "-XXXXXX", dir, key);
  int fd = mkstemp(tmp);
  if (fd < 0) return why_errno(why, nwhy, "cannot create a temporary file");
  unsigned char t[CACHE_TRAILER_BYTES];
  make_trailer(t, key, size, hash_bytes(HASH_SEED, data, size));
  int ok = write_all(fd, data, size) && write_all(fd, t, sizeof t) ? 1 : why_errno(why, nwhy, "cannot write");
  if (ok && fsync(fd) != 0) ok = why_errno(why, nwhy, "cannot fsync");
  if (close(fd) != 0 && ok) ok = why_errno(why, nwhy, "cannot write");
  if (ok && rename(tmp, path) != 0) ok = why_errno(why, nwhy, "cannot rename into place");
  if (!ok) unlink(tmp);
  return ok;
}

int cache_seal_file(const char *path, uint64_t key, char *why, size_t nwhy) {
  int fd = open(path, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return why_errno(why, nwhy, "cannot open the compiled file");
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    snprintf(why, nwhy, "the compiled file is not a regular file");
    return 0;
  }
  uint64_t h = HASH_SEED;
  unsigned char buf[65536];
  off_t at = 0;
  while (at < st.st_size) {
    ssize_t r = pread(fd, buf, sizeof buf, at);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      close(fd);
      if (r == 0) errno = EIO;
      return why_errno(why, nwhy, "cannot read the compiled file");
    }
    h = hash_bytes(h, buf, (size_t)r);
    at += r;
  }
  unsigned char t[CACHE_TRAILER_BYTES];
  make_trailer(t, key, (uint64_t)st.st_size, h);
  int ok = lseek(fd, 0, SEEK_END) >= 0 && write_all(fd, t, sizeof t) ? 1 : why_errno(why, nwhy, "cannot write");
  if (ok && fsync(fd) != 0) ok = why_errno(why, nwhy, "cannot fsync");
  if (close(fd) != 0 && ok) ok = why_errno(why, nwhy, "cannot write");
  return ok;
}

void cache_discard(const char *path, const char *why) {
  if (unlink(path) != 0 && errno != ENOENT)
    notice(NOTICE_WARNING, "cache entry %s is damaged (%s) and cannot be removed (%s); compiling without it", path, why,
           strerror(errno));
  else notice(NOTICE_WARNING, "cache entry %s is damaged (%s); rebuilding it", path, why);
}

void cache_warn_fallback(const char *dir, const char *why) {
  static int warned; /* once per process: every later compile falls back the same way */
  if (__atomic_exchange_n(&warned, 1, __ATOMIC_RELAXED)) return;
  if (why)
    notice(NOTICE_WARNING, "cannot use the cache directory %s (%s); compiling in a temporary directory instead", dir,
           why);
  else notice(NOTICE_WARNING, "cannot use the cache directory (%s); compiling in a temporary directory instead", dir);
}

void cache_warn_unwritable(const char *dir, const char *why) {
  static int warned;
  if (__atomic_exchange_n(&warned, 1, __ATOMIC_RELAXED)) return;
  notice(NOTICE_WARNING, "cannot write to the cache directory %s (%s); compiled objects are not kept", dir, why);
}
