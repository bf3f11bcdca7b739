/* The tuning database: every measurement lathe tune makes, in SQLite (tune.db in the cache directory, WAL,
 * schema version in PRAGMA user_version). A row is keyed by the kernel's structural identity (tune/key.h),
 * the bucket of its symbols' values, the device and lathe's compiler identity. Two processes may write at
 * once (WAL, a busy timeout, one transaction per write). */
#ifndef LATHE_TUNE_DB_H
#define LATHE_TUNE_DB_H
#include <stdint.h>
#include "../base/diag.h"
#include "../base/strbuf.h"

#define TUNE_DB_SCHEMA 1

typedef enum TuneStatus { TS_OK, TS_WRONG, TS_FAULT, TS_TIMEOUT } TuneStatus;
const char *tune_status_name(TuneStatus s);
int tune_status_parse(const char *s, TuneStatus *out);

typedef struct TuneRecord {
  char kernel[24];    /* structural identity: 16 hex digits of the loop nest's hash */
  char bucket[128];   /* the symbols' bucketed values, "seq=1 past=128", or "" */
  char device[256];   /* tune_device_identity */
  char compiler[64];  /* tune_compiler_identity */
  char schedule[256]; /* schedule_format */
  char name[64];      /* a kernel it was measured as (for people: rms_norm_0) */
  TuneStatus status;
  double median_us, min_us, max_us; /* 0 unless status is ok */
  int samples;
  int64_t time; /* Unix seconds */
} TuneRecord;

typedef struct TuneDb TuneDb;

/* The default file: tune.db in the cache directory ($LATHE_CACHE_DIR, else ~/.cache/lathe; created when
 * missing); 0 when there is none. */
int tune_db_default_path(char *out, size_t n);
/* Opens (creating when absent) the database at path. A file of an older schema is replaced (a warning says
 * so, the measurements are dropped); a newer schema, a file that is not a database or one that cannot be
 * opened: NULL with d saying which. */
TuneDb *tune_db_open(const char *path, Diag *d);
void tune_db_close(TuneDb *db);
int tune_db_add(TuneDb *db, const TuneRecord *r, Diag *d);
/* The fastest ok measurement (lowest median) of kernel on device under compiler, in bucket (NULL: the
 * bucket measured most recently for that kernel). 1 found, 0 none, -1 error (d). */
int tune_db_best(TuneDb *db, const char *kernel, const char *bucket, const char *device, const char *compiler,
                 TuneRecord *out, Diag *d);
/* The buckets (at most max, in text order) with an ok measurement of kernel on device under compiler: their
 * count, or -1 on an error (d). */
int tune_db_buckets(TuneDb *db, const char *kernel, const char *device, const char *compiler, char (*out)[128], int max,
                    Diag *d);
/* Every measurement, oldest first; fn returns 0 to stop. */
int tune_db_each(TuneDb *db, int (*fn)(void *ctx, const TuneRecord *r), void *ctx, Diag *d);
/* `lathe db stats`: counts of measurements, kernels, devices, compilers and statuses. */
int tune_db_stats(TuneDb *db, StrBuf *out, Diag *d);
/* Every measurement as JSON ({"schema": 1, "measurements": [...]}) into file; import adds a file's
 * measurements (those already present, same key, schedule and time, are skipped). */
int tune_db_export(TuneDb *db, const char *file, int *count, Diag *d);
int tune_db_import(TuneDb *db, const char *file, int *added, Diag *d);
/* Removes the measurements no compile of this lathe uses: those of other compiler identities. */
int tune_db_prune(TuneDb *db, const char *compiler, int *removed, Diag *d);
#endif
