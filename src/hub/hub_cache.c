/* The model cache: where pulled models live, what is there, and model names resolved to paths. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include "hub_internal.h"
#include "../base/settings.h"

const char *hub_models_dir(void) {
  static char buf[4096];
  const char *xdg = setting_str(SET_XDG_CACHE_HOME), *home = setting_str(SET_HOME);
  if (xdg) snprintf(buf, sizeof buf, "%s/lathe/models", xdg);
  else snprintf(buf, sizeof buf, "%s/.cache/lathe/models", home ? home : ".");
  return buf;
}

int hub_has_suffix(const char *s, const char *suf) {
  size_t a = strlen(s), b = strlen(suf);
  return a >= b && !strcasecmp(s + a - b, suf);
}

/* dir/name into out; 0 when it does not fit. */
__attribute__((noinline)) static int path_join(char *out, size_t n, const char *dir, const char *name) {
  int k = snprintf(out, n, "%s/%s", dir, name);
  return k >= 0 && (size_t)k < n;
}

/* s into out; 0 when it does not fit. */
__attribute__((noinline)) static int copy_str(char *out, size_t n, const char *s) {
  int k = snprintf(out, n, "%s", s);
  return k >= 0 && (size_t)k < n;
}

static int is_file(const char *p, struct stat *st) { return stat(p, st) == 0 && S_ISREG(st->st_mode); }
static int is_dir(const char *p) {
  struct stat st;
  return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

typedef struct List {
  HubCachedModel *v;
  int n, cap, oom;
} List;

static HubCachedModel *push(List *l) {
  if (l->n == l->cap) {
    int cap = l->cap ? l->cap * 2 : 16;
    HubCachedModel *nv = realloc(l->v, (size_t)cap * sizeof *nv);
    if (!nv) {
      l->oom = 1;
      return NULL;
    }
    l->v = nv;
    l->cap = cap;
  }
  HubCachedModel *m = &l->v[l->n++];
  memset(m, 0, sizeof *m);
  return m;
}

/* Bytes of a directory's files (one level) and whether any is a part file. */
static int64_t dir_bytes(const char *dir, int *partial, int64_t *mtime) {
  int64_t total = 0;
  DIR *dp = opendir(dir);
  if (!dp) return 0;
  struct dirent *e;
  while ((e = readdir(dp))) {
    if (e->d_name[0] == '.' && strcmp(e->d_name, HUB_MANIFEST)) continue;
    char p[8192];
    struct stat st;
    if (!path_join(p, sizeof p, dir, e->d_name)) continue;
    if (!is_file(p, &st)) continue;
    if (hub_has_suffix(e->d_name, ".gguf")) continue; /* listed on their own */
    if (hub_has_suffix(e->d_name, ".part")) *partial = 1;
    total += (int64_t)st.st_size;
    if ((int64_t)st.st_mtime > *mtime) *mtime = (int64_t)st.st_mtime;
  }
  closedir(dp);
  return total;
}

/* A repository directory ORG/NAME: the model itself (config.json) and each GGUF in it. */
static void scan_repo(List *l, const char *dir, const char *name) {
  char p[8192];
  struct stat st;
  path_join(p, sizeof p, dir, "config.json");
  if (is_file(p, &st)) {
    HubCachedModel *m = push(l);
    if (!m) return;
    int partial = 0;
    copy_str(m->name, sizeof m->name, name);
    copy_str(m->path, sizeof m->path, dir);
    m->bytes = dir_bytes(dir, &partial, &m->mtime);
    path_join(p, sizeof p, dir, HUB_MANIFEST);
    m->complete = !partial && is_file(p, &st);
  }
  DIR *dp = opendir(dir);
  if (!dp) return;
  struct dirent *e;
  while ((e = readdir(dp))) {
    int part = hub_has_suffix(e->d_name, ".gguf.part");
    if (e->d_name[0] == '.' || (!hub_has_suffix(e->d_name, ".gguf") && !part)) continue;
    if (!path_join(p, sizeof p, dir, e->d_name)) continue;
    if (!is_file(p, &st)) continue;
    HubCachedModel *m = push(l);
    if (!m) break;
    if (snprintf(m->name, sizeof m->name, "%s:%.*s", name, (int)(strlen(e->d_name) - (part ? 5 : 0)), e->d_name) < 0)
      continue;
    copy_str(m->path, sizeof m->path, p);
    m->bytes = (int64_t)st.st_size;
    m->mtime = (int64_t)st.st_mtime;
    m->complete = !part;
  }
  closedir(dp);
}

static int by_name(const void *a, const void *b) {
  return strcmp(((const HubCachedModel *)a)->name, ((const HubCachedModel *)b)->name);
}

HubCachedModel *hub_list(int *n, Diag *d) {
  List l = {0};
  const char *root = hub_models_dir();
  *n = 0;
  DIR *top = opendir(root);
  if (!top) return NULL;
  struct dirent *e;
  while (!l.oom && (e = readdir(top))) {
    if (e->d_name[0] == '.') continue;
    char p[8192];
    struct stat st;
    if (!path_join(p, sizeof p, root, e->d_name)) continue;
    if (is_file(p, &st) && hub_has_suffix(e->d_name, ".gguf")) {
      HubCachedModel *m = push(&l);
      if (!m) break;
      copy_str(m->name, sizeof m->name, e->d_name);
      copy_str(m->path, sizeof m->path, p);
      m->bytes = (int64_t)st.st_size;
      m->mtime = (int64_t)st.st_mtime;
      m->complete = 1;
      continue;
    }
    if (!is_dir(p)) continue;
    DIR *org = opendir(p);
    if (!org) continue;
    struct dirent *r;
    while (!l.oom && (r = readdir(org))) {
      if (r->d_name[0] == '.') continue;
      char q[8192 + 256], name[600];
      if (!path_join(q, sizeof q, p, r->d_name)) continue;
      if (!is_dir(q)) continue;
      snprintf(name, sizeof name, "%.255s/%.255s", e->d_name, r->d_name);
      scan_repo(&l, q, name);
    }
    closedir(org);
  }
  closedir(top);
  if (l.oom) {
    free(l.v);
    diag_error(d, 0, 0, "out of memory: listing the model cache %s", root);
    return NULL;
  }
  if (l.n) qsort(l.v, (size_t)l.n, sizeof *l.v, by_name);
  *n = l.n;
  return l.v;
}

/* The one GGUF in dir whose name contains tag (case-insensitive), or 0. */
static int find_tagged(const char *dir, const char *tag, char *out, size_t n) {
  DIR *dp = opendir(dir);
  if (!dp) return 0;
  struct dirent *e;
  int found = 0;
  while ((e = readdir(dp))) {
    if (!hub_has_suffix(e->d_name, ".gguf") || !strcasestr(e->d_name, tag)) continue;
    if (found++) break;
    path_join(out, n, dir, e->d_name);
  }
  closedir(dp);
  return found == 1;
}

int hub_resolve(const char *arg, char *out, size_t n) {
  struct stat st;
  if (!arg || !*arg || stat(arg, &st) == 0 || arg[0] == '/' || arg[0] == '.' || strstr(arg, "..")) return 0;
  char p[8192];
  const char *root = hub_models_dir();
  const char *colon = strchr(arg, ':');
  if (colon) {
    char dir[4500];
    if (snprintf(dir, sizeof dir, "%s/%.*s", root, (int)(colon - arg), arg) >= (int)sizeof dir) return 0;
    if (!path_join(p, sizeof p, dir, colon + 1)) return 0;
    if (is_file(p, &st)) {
      copy_str(out, n, p);
      return 1;
    }
    return find_tagged(dir, colon + 1, out, n);
  }
  if (!path_join(p, sizeof p, root, arg)) return 0;
  if (is_file(p, &st)) {
    copy_str(out, n, p);
    return 1;
  }
  if (!is_dir(p)) return 0;
  char cfg[8300];
  path_join(cfg, sizeof cfg, p, "config.json");
  if (is_file(cfg, &st)) {
    copy_str(out, n, p);
    return 1;
  }
  return find_tagged(p, ".gguf", out, n); /* a repository pulled for its one GGUF */
}
