/* Models by name: downloads from a Hugging Face-style hub into the model cache, and finds cached
 * models again. The hub is $LATHE_HF_ENDPOINT (default https://huggingface.co); $HF_TOKEN, when
 * set, is sent as a bearer token (gated models). The cache is $XDG_CACHE_HOME/lathe/models (else
 * ~/.cache/lathe/models): ORG/NAME/ holds a pulled repository's files, a pulled GGUF lies in it too.
 * Library code: nothing here prints; progress goes through a callback. */
#ifndef LATHE_HUB_H
#define LATHE_HUB_H
#include <stdint.h>
#include "../base/diag.h"

/* "ORG/NAME[:FILE]" split; FILE is a file name in the repository or a quantization tag (Q4_K_M)
 * matched against its .gguf files. */
typedef struct HubRef {
  char repo[256];
  char file[256]; /* "" when not given */
} HubRef;
int hub_ref_parse(const char *spec, HubRef *r, Diag *d);

/* One file of a repository, as the hub's tree listing gives it. */
typedef struct HubFile {
  char *path;
  int64_t size;
  char sha256[65];  /* LFS files: the content's SHA-256; "" otherwise */
  char git_oid[41]; /* the git blob id (SHA-1 of "blob SIZE\0" + content); "" when not listed */
} HubFile;

typedef struct HubProgress {
  /* called as bytes arrive: the file, bytes done and total of that file (total 0 = unknown) */
  void (*on_bytes)(void *user, const char *file, int64_t done, int64_t total);
  /* one line of news: a retry, a resume, a file already present */
  void (*on_note)(void *user, const char *msg);
  void *user;
} HubProgress;

typedef struct HubPullOptions {
  const char *revision; /* default "main" */
  const char *endpoint; /* default $LATHE_HF_ENDPOINT or https://huggingface.co */
  const char *token;    /* default $HF_TOKEN */
  const char *dest;     /* default the cache's ORG/NAME directory */
  int retries;          /* attempts after a dropped connection, each resuming; default 3 */
} HubPullOptions;

/* Downloads what ref names into the cache (or opts->dest) and writes the path to use as MODEL
 * (the directory, or the GGUF file) into out. Files already complete are kept; a partial file
 * (NAME.part) is resumed; every file is checked against the hub's size and checksum before it is
 * renamed into place, so a failed pull leaves no file that looks complete. */
int hub_pull(const HubRef *ref, const HubPullOptions *opts, const HubProgress *progress, char *out, size_t n, Diag *d);

/* The model cache directory (no trailing slash). */
const char *hub_models_dir(void);

/* A cached model: a repository directory (config.json inside) or a GGUF file. */
typedef struct HubCachedModel {
  char name[512]; /* "ORG/NAME", "ORG/NAME:FILE.gguf" or a top-level "FILE.gguf" */
  char path[4096];
  int64_t bytes;
  int64_t mtime;
  int complete; /* 0: a pull was interrupted (part files present, or no manifest) */
} HubCachedModel;
/* Lists the cache into a malloc'ed array (sorted by name); *n gets the count. NULL with *n = 0 when
 * the cache is empty or absent; NULL with d set on an error. */
HubCachedModel *hub_list(int *n, Diag *d);

/* If arg names a cached model (ORG/NAME, ORG/NAME:FILE, or a file name in the cache) and is not a
 * path that exists, writes the model's path into out and returns 1; else 0. */
int hub_resolve(const char *arg, char *out, size_t n);
#endif
