/* On-disk cache of compiled objects, keyed by a content hash (source, compiler identity, flags).
 * Location: $LATHE_CACHE_DIR, else $XDG_CACHE_HOME/lathe, else ~/.cache/lathe.
 *
 * Every entry ends in a trailer: a magic tag, the entry's key, the content's length and a checksum of
 * content, key and length. Entries are written to a temporary name in the cache directory, sealed with the
 * trailer, fsync'ed and renamed, so a crashed or full-disk compile never leaves a torn entry under the
 * final name; and an entry is verified (opened without following links or blocking, a regular file, the
 * trailer complete and matching) before anything uses it, so one damaged, replaced or foreign entry is
 * rebuilt, never loaded. (The ELF loader ignores the bytes after the sections, and the CUDA driver is
 * given the content without the trailer.) */
#ifndef LATHE_CACHE_H
#define LATHE_CACHE_H
#include <stddef.h>
#include <stdint.h>

/* Directory for cached objects (created if missing); NULL if none can be made. */
const char *cache_dir(void);
/* For messages after cache_dir() returned NULL: the directory it tried and why it failed. */
const char *cache_dir_failure(void);
/* Path of the entry for key with the given suffix (".so", ".cubin"). */
void cache_path(char *out, size_t n, uint64_t key, const char *suffix);

#define CACHE_TRAILER_BYTES 32
#define CACHE_MAX_ENTRY_BYTES ((size_t)1 << 31) /* larger files are not entries of ours */

typedef enum CacheLookup { CACHE_MISS, CACHE_HIT, CACHE_BAD, CACHE_NOMEM } CacheLookup;
/* Reads and verifies the entry at path. HIT: *data (malloc'ed, the caller frees) and *size hold the
 * content without the trailer. MISS: no entry. BAD: something is at path but it is not a valid entry for
 * key; why says what (e.g. "truncated", "not a regular file", "written for another key"). NOMEM: the entry could
 * not be read into memory; why is the "out of memory: N bytes for ..." message (an error, not a bad entry). */
CacheLookup cache_load(const char *path, uint64_t key, void **data, size_t *size, char *why, size_t nwhy);
/* Stores content under path: a temporary file in dir, the trailer, fsync, rename. 0 on failure (disk full,
 * directory not writable) with the reason in why; nothing is left behind. */
int cache_store(const char *dir, const char *path, uint64_t key, const void *data, size_t size, char *why, size_t nwhy);
/* Appends the trailer to the file at path (content already written, e.g. by a compiler) and fsyncs it; the
 * caller renames it into place. 0 on failure with the reason in why. */
int cache_seal_file(const char *path, uint64_t key, char *why, size_t nwhy);
/* Removes a bad entry so it can be rebuilt, and warns once per entry: "cache entry P is damaged (why);
 * rebuilding it". */
void cache_discard(const char *path, const char *why);
/* Warns, once per process, that the cache directory cannot be used and a temporary one is (why NULL: dir is
 * cache_dir_failure()'s description). */
void cache_warn_fallback(const char *dir, const char *why);
/* Warns, once per process, that compiled objects cannot be stored in the cache directory. */
void cache_warn_unwritable(const char *dir, const char *why);
#endif
