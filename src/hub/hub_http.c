/* HTTP through libcurl: small GETs into memory, and file downloads that resume, retry after a dropped
 * connection and refuse to keep anything that fails the hub's size or checksum. */
#include <curl/curl.h>
#include <errno.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "../base/mem.h"
#include "hub_internal.h"

#define ERROR_BODY_MAX 300

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static void curl_init_once(void) { curl_global_init(CURL_GLOBAL_DEFAULT); }

void hub_note(const HubConn *c, const char *fmt, ...) {
  if (!c->progress || !c->progress->on_note) return;
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  c->progress->on_note(c->progress->user, msg);
}

static CURL *easy_new(const HubConn *c, const char *url, struct curl_slist **headers) {
  pthread_once(&curl_once, curl_init_once);
  CURL *h = curl_easy_init();
  if (!h) return NULL;
  curl_easy_setopt(h, CURLOPT_URL, url);
  curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 1L);
  curl_easy_setopt(h, CURLOPT_MAXREDIRS, 10L);
  curl_easy_setopt(h, CURLOPT_USERAGENT, "lathe/0.1");
  curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, 30L);
  /* a stalled transfer (under 1 byte/s for 60 s) counts as a dropped connection */
  curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1L);
  curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, 60L);
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  *headers = NULL;
  if (c->token && *c->token) {
    char auth[1024];
    snprintf(auth, sizeof auth, "Authorization: Bearer %s", c->token);
    *headers = curl_slist_append(*headers, auth);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, *headers);
  }
  return h;
}

typedef struct MemBody {
  char *data;
  size_t len, cap;
  int oom;
} MemBody;

static size_t mem_write(char *p, size_t sz, size_t nm, void *user) {
  MemBody *b = user;
  size_t n = sz * nm;
  if (b->len + n + 1 > b->cap) {
    size_t cap = b->cap ? b->cap * 2 : 4096;
    while (cap < b->len + n + 1) cap *= 2;
    char *nd = realloc(b->data, cap);
    if (!nd) {
      b->oom = 1;
      return 0;
    }
    b->data = nd;
    b->cap = cap;
  }
  memcpy(b->data + b->len, p, n);
  b->len += n;
  b->data[b->len] = 0;
  return n;
}

char *hub_http_get(const HubConn *c, const char *url, long *status, size_t *len, Diag *d) {
  struct curl_slist *hdr;
  CURL *h = easy_new(c, url, &hdr);
  if (!h) {
    diag_error(d, 0, 0, "pull: cannot start libcurl");
    return NULL;
  }
  MemBody b = {0};
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, mem_write);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, &b);
  curl_easy_setopt(h, CURLOPT_TIMEOUT, 120L);
  CURLcode rc = curl_easy_perform(h);
  curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, status);
  curl_easy_cleanup(h);
  curl_slist_free_all(hdr);
  if (b.oom) {
    free(b.data);
    diag_error(d, 0, 0, "out of memory: %zu bytes for the reply from %s", b.cap * 2, url);
    return NULL;
  }
  if (rc != CURLE_OK) {
    free(b.data);
    diag_error(d, 0, 0, "pull: %s: %s", url, curl_easy_strerror(rc));
    return NULL;
  }
  if (!b.data) b.data = xcalloc(1, 1, "an empty response");
  if (len) *len = b.len;
  return b.data;
}

/* One transfer's state: bytes go to the part file only while the status is 200 or 206. */
typedef struct Transfer {
  CURL *h;
  FILE *out;
  const char *part;
  int64_t offset; /* bytes in the part file when this attempt began */
  int64_t written;
  int started;
  long status;
  char err_body[ERROR_BODY_MAX + 1];
  size_t err_len;
  int io_error;
  const HubConn *c;
  const HubFile *f;
} Transfer;

static size_t file_write(char *p, size_t sz, size_t nm, void *user) {
  Transfer *t = user;
  size_t n = sz * nm;
  if (!t->started) {
    t->started = 1;
    curl_easy_getinfo(t->h, CURLINFO_RESPONSE_CODE, &t->status);
    if (t->status == 200 && t->offset > 0) {
      /* the server ignored the range: start over */
      if (ftruncate(fileno(t->out), 0) != 0 || fseek(t->out, 0, SEEK_SET) != 0) {
        t->io_error = errno;
        return 0;
      }
      t->offset = 0;
    }
  }
  if (t->status != 200 && t->status != 206) {
    size_t k = n < ERROR_BODY_MAX - t->err_len ? n : ERROR_BODY_MAX - t->err_len;
    memcpy(t->err_body + t->err_len, p, k);
    t->err_len += k;
    t->err_body[t->err_len] = 0;
    return n;
  }
  if (fwrite(p, 1, n, t->out) != n) {
    t->io_error = errno ? errno : EIO;
    return 0;
  }
  t->written += (int64_t)n;
  return n;
}

static int progress_cb(void *user, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal, curl_off_t ulnow) {
  Transfer *t = user;
  const HubProgress *p = t->c->progress;
  if (p && p->on_bytes && (t->status == 0 || t->status == 200 || t->status == 206))
    p->on_bytes(p->user, t->f->path, t->offset + (int64_t)dlnow, t->f->size);
  return 0;
}

static int64_t file_size(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISREG(st.st_mode) ? (int64_t)st.st_size : -1;
}

/* Hex digest of the whole file under md (EVP); 0 on a read error. */
static int digest_file(const char *path, const EVP_MD *md, const char *prefix, size_t prefix_len, char *hex) {
  FILE *fp = fopen(path, "rb");
  if (!fp) return 0;
  EVP_MD_CTX *ctx = EVP_MD_CTX_new();
  int ok = ctx && EVP_DigestInit_ex(ctx, md, NULL);
  if (ok && prefix_len) ok = EVP_DigestUpdate(ctx, prefix, prefix_len);
  static __thread unsigned char buf[1 << 16];
  size_t n;
  while (ok && (n = fread(buf, 1, sizeof buf, fp)) > 0) ok = EVP_DigestUpdate(ctx, buf, n);
  if (ferror(fp)) ok = 0;
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (ok) ok = EVP_DigestFinal_ex(ctx, out, &len);
  EVP_MD_CTX_free(ctx);
  fclose(fp);
  for (unsigned i = 0; ok && i < len; i++) sprintf(hex + 2 * i, "%02x", out[i]);
  return ok;
}

int hub_verify_file(const char *path, const HubFile *f, Diag *d) {
  int64_t got = file_size(path);
  if (got != f->size) {
    diag_error(d, 0, 0, "pull: %s: %lld bytes, the hub lists %lld", f->path, (long long)got, (long long)f->size);
    return 0;
  }
  char hex[2 * EVP_MAX_MD_SIZE + 1];
  if (f->sha256[0]) {
    if (!digest_file(path, EVP_sha256(), NULL, 0, hex)) {
      diag_error(d, 0, 0, "pull: cannot read %s back to check it: %s", path, strerror(errno));
      return 0;
    }
    if (strcmp(hex, f->sha256)) {
      diag_error(d, 0, 0, "pull: %s: SHA-256 %s does not match the hub's %s", f->path, hex, f->sha256);
      return 0;
    }
  } else if (f->git_oid[0]) {
    char prefix[64];
    int k = snprintf(prefix, sizeof prefix, "blob %lld", (long long)f->size);
    if (!digest_file(path, EVP_sha1(), prefix, (size_t)k + 1, hex)) {
      diag_error(d, 0, 0, "pull: cannot read %s back to check it: %s", path, strerror(errno));
      return 0;
    }
    if (strcmp(hex, f->git_oid)) {
      diag_error(d, 0, 0, "pull: %s: git blob id %s does not match the hub's %s", f->path, hex, f->git_oid);
      return 0;
    }
  }
  return 1;
}

static int retryable(CURLcode rc, long status) {
  if (rc == CURLE_OK) return status == 429 || status >= 500;
  return rc == CURLE_PARTIAL_FILE || rc == CURLE_RECV_ERROR || rc == CURLE_SEND_ERROR || rc == CURLE_GOT_NOTHING ||
         rc == CURLE_OPERATION_TIMEDOUT || rc == CURLE_COULDNT_CONNECT;
}

/* One attempt: appends to the part file from its current length. 1 done, 0 failed (d set), -1 retry. */
static int attempt(const HubConn *c, const char *url, const HubFile *f, const char *part, Diag *d) {
  int64_t have = file_size(part);
  if (have < 0) have = 0;
  if (have > f->size) { /* longer than the file can be: not a prefix of it */
    unlink(part);
    have = 0;
  }
  if (have == f->size && f->size > 0) return 1;
  FILE *out = fopen(part, have ? "ab" : "wb");
  if (!out) {
    diag_error(d, 0, 0, "pull: cannot write %s: %s", part, strerror(errno));
    return 0;
  }
  if (have) hub_note(c, "resuming %s at %lld of %lld bytes", f->path, (long long)have, (long long)f->size);
  struct curl_slist *hdr;
  Transfer t = {.out = out, .part = part, .offset = have, .c = c, .f = f};
  t.h = easy_new(c, url, &hdr);
  if (!t.h) {
    fclose(out);
    diag_error(d, 0, 0, "pull: cannot start libcurl");
    return 0;
  }
  curl_easy_setopt(t.h, CURLOPT_WRITEFUNCTION, file_write);
  curl_easy_setopt(t.h, CURLOPT_WRITEDATA, &t);
  curl_easy_setopt(t.h, CURLOPT_NOPROGRESS, 0L);
  curl_easy_setopt(t.h, CURLOPT_XFERINFOFUNCTION, progress_cb);
  curl_easy_setopt(t.h, CURLOPT_XFERINFODATA, &t);
  if (have) curl_easy_setopt(t.h, CURLOPT_RESUME_FROM_LARGE, (curl_off_t)have);
  CURLcode rc = curl_easy_perform(t.h);
  if (!t.started) curl_easy_getinfo(t.h, CURLINFO_RESPONSE_CODE, &t.status);
  curl_easy_cleanup(t.h);
  curl_slist_free_all(hdr);
  int close_err = fclose(out) != 0;
  if (t.io_error || close_err) {
    diag_error(d, 0, 0, "pull: writing %s failed: %s", part, strerror(t.io_error ? t.io_error : errno));
    return 0;
  }
  if (rc == CURLE_RANGE_ERROR || t.status == 416) { /* a stale part file: start over once */
    unlink(part);
    return -1;
  }
  if (retryable(rc, t.status)) {
    hub_note(c, "%s: %s after %lld bytes", f->path, rc == CURLE_OK ? "server busy" : curl_easy_strerror(rc),
             (long long)(have + t.written));
    return -1;
  }
  if (rc != CURLE_OK) {
    diag_error(d, 0, 0, "pull: %s: %s", url, curl_easy_strerror(rc));
    return 0;
  }
  if (t.status != 200 && t.status != 206) {
    for (size_t i = 0; i < t.err_len; i++)
      if ((unsigned char)t.err_body[i] < 32) t.err_body[i] = ' ';
    diag_error(d, 0, 0, "pull: %s: HTTP %ld%s%s%s", url, t.status,
               t.status == 401 || t.status == 403 ? " (a gated or private model: set HF_TOKEN)" : "",
               t.err_len ? ": " : "", t.err_body);
    return 0;
  }
  return file_size(part) == f->size ? 1 : -1;
}

int hub_download(const HubConn *c, const char *url, const HubFile *f, const char *dest, int retries, Diag *d) {
  char part[4200];
  snprintf(part, sizeof part, "%s.part", dest);
  for (int i = 0; i <= retries; i++) {
    int r = attempt(c, url, f, part, d);
    if (r == 0) return 0;
    if (r == 1) {
      if (!hub_verify_file(part, f, d)) {
        unlink(part); /* corrupt: nothing of it may look downloaded */
        return 0;
      }
      if (rename(part, dest) != 0) {
        diag_error(d, 0, 0, "pull: cannot rename %s to %s: %s", part, dest, strerror(errno));
        return 0;
      }
      return 1;
    }
    if (i < retries) hub_note(c, "retrying %s (attempt %d of %d)", f->path, i + 2, retries + 1);
  }
  diag_error(d, 0, 0, "pull: %s: gave up after %d attempts (the partial file %s is kept; pull again to resume)",
             f->path, retries + 1, part);
  return 0;
}

int hub_mkdirs(const char *path, Diag *d) {
  char buf[4096];
  snprintf(buf, sizeof buf, "%s", path);
  for (char *p = buf + 1; *p; p++) {
    if (*p != '/') continue;
    *p = 0;
    if (mkdir(buf, 0755) != 0 && errno != EEXIST) {
      diag_error(d, 0, 0, "pull: cannot create %s: %s", buf, strerror(errno));
      return 0;
    }
    *p = '/';
  }
  if (mkdir(buf, 0755) != 0 && errno != EEXIST) {
    diag_error(d, 0, 0, "pull: cannot create %s: %s", buf, strerror(errno));
    return 0;
  }
  return 1;
}
