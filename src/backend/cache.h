/* On-disk cache of compiled objects, keyed by a content hash (source, compiler identity, flags).
 * Location: $LATHE_CACHE_DIR, else $XDG_CACHE_HOME/lathe, else ~/.cache/lathe.
 * Entries are written to a temporary name and renamed, so a crashed compile never leaves a torn entry. */
#ifndef LATHE_CACHE_H
#define LATHE_CACHE_H
#include <stddef.h>
#include <stdint.h>

/* Directory for cached objects (created if missing); NULL if none can be made. */
const char *cache_dir(void);
/* Path of the entry for key with the given suffix (".so", ".cubin"), in a static buffer per call site. */
void cache_path(char *out, size_t n, uint64_t key, const char *suffix);
#endif
