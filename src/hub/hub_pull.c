/* `lathe pull`: which files of a repository make a model, and fetching them into the cache. */
#include <ctype.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>
#include "../base/mem.h"
#include "hub_internal.h"
#include "../base/settings.h"

#define DEFAULT_ENDPOINT "https://huggingface.co"
static int valid_repo_char(char c) { return isalnum((unsigned char)c) || c == '-' || c == '_' || c == '.'; }

int hub_ref_parse(const char *spec, HubRef *r, Diag *d) {
  memset(r, 0, sizeof *r);
  const char *colon = strchr(spec, ':');
  size_t rl = colon ? (size_t)(colon - spec) : strlen(spec);
  const char *slash = memchr(spec, '/', rl);
  int ok = slash && slash > spec && (size_t)(slash - spec) + 1 < rl && rl < sizeof r->repo;
  for (size_t i = 0; ok && i < rl; i++) ok = spec + i == slash || valid_repo_char(spec[i]);
  if (ok && memchr(slash + 1, '/', rl - (size_t)(slash + 1 - spec))) ok = 0;
  if (ok && (spec[0] == '.' || slash[1] == '.')) ok = 0;
  if (!ok) {
    diag_error(d, 0, 0, "pull: '%.200s' is not a model name: expected ORG/NAME or ORG/NAME:FILE", spec);
    return 0;
  }
  memcpy(r->repo, spec, rl);
  if (colon) {
    const char *f = colon + 1;
    if (!*f || strlen(f) >= sizeof r->file || strstr(f, "..") || f[0] == '/') {
      diag_error(d, 0, 0, "pull: bad file name after ':' in '%.200s'", spec);
      return 0;
    }
    snprintf(r->file, sizeof r->file, "%s", f);
  }
  return 1;
}

void hub_files_free(HubFile *f, int n) {
  for (int i = 0; i < n; i++) free(f[i].path);
  free(f);
}

static int is_hex(const char *s, size_t n) {
  if (strlen(s) != n) return 0;
  for (size_t i = 0; i < n; i++)
    if (!isxdigit((unsigned char)s[i])) return 0;
  return 1;
}

HubFile *hub_list_files(const HubConn *c, const char *repo, const char *rev, int *n, Diag *d) {
  char url[2048];
  snprintf(url, sizeof url, "%s/api/models/%s/tree/%s?recursive=true", c->endpoint, repo, rev);
  long status = 0;
  char *body = hub_http_get(c, url, &status, NULL, d);
  if (!body) return NULL;
  if (status != 200) {
    if (status == 401 || status == 403)
      diag_error(d, 0, 0, "pull: %s at %s needs a token (HTTP %ld): set HF_TOKEN", repo, c->endpoint, status);
    else if (status == 404) diag_error(d, 0, 0, "pull: no model '%s' (revision %s) at %s", repo, rev, c->endpoint);
    else diag_error(d, 0, 0, "pull: listing %s failed: HTTP %ld", url, status);
    free(body);
    return NULL;
  }
  json_error_t je;
  json_t *root = json_loads(body, 0, &je);
  free(body);
  if (!json_is_array(root)) {
    diag_error(d, 0, 0, "pull: the hub's file list for %s is not a JSON array (%s)", repo, je.text);
    json_decref(root);
    return NULL;
  }
  size_t cnt = json_array_size(root);
  HubFile *files = calloc(cnt ? cnt : 1, sizeof *files);
  if (!files) {
    json_decref(root);
    diag_error(d, 0, 0, "out of memory: %zu bytes for the file list", cnt * sizeof *files);
    return NULL;
  }
  int k = 0;
  for (size_t i = 0; i < cnt; i++) {
    json_t *e = json_array_get(root, i);
    const char *type = json_string_value(json_object_get(e, "type"));
    const char *path = json_string_value(json_object_get(e, "path"));
    json_t *size = json_object_get(e, "size");
    if (!type || strcmp(type, "file") || !path) continue;
    if (!json_is_integer(size) || json_integer_value(size) < 0 || !*path || path[0] == '/' || strstr(path, "..")) {
      diag_error(d, 0, 0, "pull: the hub lists '%.200s' in %s without a valid size or path", path, repo);
      hub_files_free(files, k);
      json_decref(root);
      return NULL;
    }
    HubFile *f = &files[k++];
    f->path = xstrdup(path, "a file name");
    f->size = json_integer_value(size);
    const char *oid = json_string_value(json_object_get(e, "oid"));
    if (oid && is_hex(oid, 40)) snprintf(f->git_oid, sizeof f->git_oid, "%s", oid);
    json_t *lfs = json_object_get(e, "lfs");
    const char *sha = json_string_value(json_object_get(lfs, "oid"));
    if (sha && !strncmp(sha, "sha256:", 7)) sha += 7;
    if (sha && is_hex(sha, 64)) snprintf(f->sha256, sizeof f->sha256, "%s", sha);
    if (lfs && !f->sha256[0]) {
      diag_error(d, 0, 0, "pull: the hub lists %s in %s as LFS without a SHA-256", path, repo);
      hub_files_free(files, k);
      json_decref(root);
      return NULL;
    }
  }
  json_decref(root);
  *n = k;
  return files;
}

/* The files a Hugging Face model directory needs (top level only). */
static int wanted_for_model(const char *path) {
  static const char *names[] = {"config.json",
                                "generation_config.json",
                                "tokenizer.json",
                                "tokenizer_config.json",
                                "special_tokens_map.json",
                                "chat_template.jinja",
                                "model.safetensors.index.json"};
  if (strchr(path, '/')) return 0;
  for (size_t i = 0; i < sizeof names / sizeof *names; i++)
    if (!strcmp(path, names[i])) return 1;
  return hub_has_suffix(path, ".safetensors");
}

static void list_gguf(const HubFile *f, int n, char *out, size_t cap) {
  out[0] = 0;
  for (int i = 0; i < n; i++) {
    if (!hub_has_suffix(f[i].path, ".gguf")) continue;
    size_t l = strlen(out);
    if (l + strlen(f[i].path) + 3 >= cap) break;
    snprintf(out + l, cap - l, "%s%s", l ? ", " : "", f[i].path);
  }
}

/* Marks which files to fetch; returns the count, or -1 with d set. *single is the chosen file for
 * ORG/NAME:FILE pulls. */
static int choose(const HubRef *ref, const HubFile *f, int n, char *pick, int *single, Diag *d) {
  char ggufs[1024];
  *single = -1;
  if (ref->file[0]) {
    for (int i = 0; i < n; i++)
      if (!strcmp(f[i].path, ref->file)) {
        *single = i;
        pick[i] = 1;
        return 1;
      }
    int found = -1, count = 0;
    for (int i = 0; i < n; i++)
      if (hub_has_suffix(f[i].path, ".gguf") && strcasestr(f[i].path, ref->file)) {
        found = i;
        count++;
      }
    list_gguf(f, n, ggufs, sizeof ggufs);
    if (count == 1) {
      *single = found;
      pick[found] = 1;
      return 1;
    }
    if (count > 1) diag_error(d, 0, 0, "pull: '%s' matches several files of %s: %s", ref->file, ref->repo, ggufs);
    else
      diag_error(d, 0, 0, "pull: %s has no file '%s'%s%s", ref->repo, ref->file, *ggufs ? "; its GGUF files: " : "",
                 ggufs);
    return -1;
  }
  int weights = 0, config = 0, k = 0;
  for (int i = 0; i < n; i++)
    if (wanted_for_model(f[i].path)) {
      pick[i] = 1;
      k++;
      weights += hub_has_suffix(f[i].path, ".safetensors");
      config += !strcmp(f[i].path, "config.json");
    }
  if (!weights || !config) {
    list_gguf(f, n, ggufs, sizeof ggufs);
    if (*ggufs)
      diag_error(d, 0, 0, "pull: %s has no safetensors model; pull one of its GGUF files as %s:FILE (%s)", ref->repo,
                 ref->repo, ggufs);
    else
      diag_error(d, 0, 0, "pull: %s has no %s: not a model lathe can load", ref->repo,
                 config ? "*.safetensors weights" : "config.json");
    return -1;
  }
  return k;
}

static int write_manifest(const char *dir, const HubRef *ref, const char *rev, const char *endpoint, const HubFile *f,
                          int n, const char *pick, Diag *d) {
  json_t *files = json_array();
  for (int i = 0; i < n; i++)
    if (pick[i])
      json_array_append_new(
          files, json_pack("{s:s, s:I, s:s}", "path", f[i].path, "size", (json_int_t)f[i].size, "sha256", f[i].sha256));
  json_t *m =
      json_pack("{s:s, s:s, s:s, s:o}", "repo", ref->repo, "revision", rev, "endpoint", endpoint, "files", files);
  char path[4200], tmp[4300];
  snprintf(path, sizeof path, "%s/" HUB_MANIFEST, dir);
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  int ok = json_dump_file(m, tmp, JSON_INDENT(2)) == 0 && rename(tmp, path) == 0;
  json_decref(m);
  if (!ok) diag_error(d, 0, 0, "pull: cannot write %s", path);
  return ok;
}

int hub_pull(const HubRef *ref, const HubPullOptions *opts, const HubProgress *progress, char *out, size_t n, Diag *d) {
  HubPullOptions o = opts ? *opts : (HubPullOptions){0};
  if (!o.revision) o.revision = "main";
  if (!o.endpoint) o.endpoint = setting_str(SET_HF_ENDPOINT);
  if (!o.endpoint || !*o.endpoint) o.endpoint = DEFAULT_ENDPOINT;
  if (!o.token) o.token = setting_str(SET_HF_TOKEN);
  if (o.retries <= 0) o.retries = 3;
  char endpoint[1024];
  snprintf(endpoint, sizeof endpoint, "%s", o.endpoint);
  for (size_t l = strlen(endpoint); l && endpoint[l - 1] == '/'; l--) endpoint[l - 1] = 0;
  HubConn c = {.endpoint = endpoint, .token = o.token, .progress = progress};

  char dir[4096];
  if (o.dest) snprintf(dir, sizeof dir, "%s", o.dest);
  else snprintf(dir, sizeof dir, "%s/%s", hub_models_dir(), ref->repo);

  int nf = 0;
  HubFile *files = hub_list_files(&c, ref->repo, o.revision, &nf, d);
  if (!files) return 0;
  char *pick = calloc((size_t)nf + 1, 1);
  int single = -1, ok = pick != NULL;
  if (!pick) diag_error(d, 0, 0, "out of memory: %d bytes for the file choice", nf + 1);
  if (ok) ok = choose(ref, files, nf, pick, &single, d) >= 0;
  if (ok) ok = hub_mkdirs(dir, d);
  for (int i = 0; ok && i < nf; i++) {
    if (!pick[i]) continue;
    char dest[4200], url[4096];
    snprintf(dest, sizeof dest, "%s/%s", dir, files[i].path);
    char *sub = strrchr(dest, '/');
    if (strchr(files[i].path, '/')) { /* a file in a folder of the repository */
      *sub = 0;
      ok = hub_mkdirs(dest, d);
      *sub = '/';
      if (!ok) break;
    }
    struct stat st;
    if (stat(dest, &st) == 0 && S_ISREG(st.st_mode) && (int64_t)st.st_size == files[i].size) {
      Diag vd = {0};
      if (hub_verify_file(dest, &files[i], &vd)) {
        hub_note(&c, "%s: already complete", files[i].path);
        continue;
      }
      hub_note(&c, "%s: the cached copy is damaged (%s); fetching it again", files[i].path, vd.msg);
      unlink(dest);
    }
    snprintf(url, sizeof url, "%s/%s/resolve/%s/%s", endpoint, ref->repo, o.revision, files[i].path);
    ok = hub_download(&c, url, &files[i], dest, o.retries, d);
  }
  if (ok && single < 0) ok = write_manifest(dir, ref, o.revision, endpoint, files, nf, pick, d);
  if (ok) {
    if (single >= 0) snprintf(out, n, "%s/%s", dir, files[single].path);
    else snprintf(out, n, "%s", dir);
  }
  free(pick);
  hub_files_free(files, nf);
  return ok;
}
