/* Pieces of the hub client shared by its files. */
#ifndef LATHE_HUB_INTERNAL_H
#define LATHE_HUB_INTERNAL_H
#include <stddef.h>
#include "hub.h"

/* The file a completed repository pull leaves in its directory (what it fetched, from where). */
#define HUB_MANIFEST ".lathe-pull.json"

/* Whether s ends in suf, ignoring case (".gguf", ".safetensors"). */
int hub_has_suffix(const char *s, const char *suf);

/* Where a pull talks to and with what. */
typedef struct HubConn {
  const char *endpoint; /* no trailing slash */
  const char *token;    /* NULL: anonymous */
  const HubProgress *progress;
} HubConn;

/* GET url into a malloc'ed, NUL-terminated body; *status gets the HTTP status. Returns the body, or
 * NULL with d set when the request could not be made at all. */
char *hub_http_get(const HubConn *c, const char *url, long *status, size_t *len, Diag *d);

/* Downloads url into dest (through dest.part, resumed when present), checks it against f's size and
 * checksums, then renames it into place. */
int hub_download(const HubConn *c, const char *url, const HubFile *f, const char *dest, int retries, Diag *d);

/* Checks a file's size and checksums against f (what the hub listed). */
int hub_verify_file(const char *path, const HubFile *f, Diag *d);

/* The repository's files (tree listing of revision rev); *n gets the count. */
HubFile *hub_list_files(const HubConn *c, const char *repo, const char *rev, int *n, Diag *d);
void hub_files_free(HubFile *f, int n);

/* mkdir -p; 0 with d set on failure. */
int hub_mkdirs(const char *path, Diag *d);

/* Writes a note through the progress callback, if any. */
void hub_note(const HubConn *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#endif
