/* The tuning database over SQLite. Every statement that writes runs in its own IMMEDIATE transaction and
 * waits (busy timeout) for another writer, so two tunes at once both land. */
#include "db.h"
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "../base/mem.h"
#include "../base/notice.h"
#include "../backend/cache.h"

struct TuneDb {
  sqlite3 *h;
  char path[1024];
};

static const char *status_names[] = {"ok", "wrong", "fault", "timeout"};

const char *tune_status_name(TuneStatus s) { return s >= TS_OK && s <= TS_TIMEOUT ? status_names[s] : "?"; }

int tune_status_parse(const char *s, TuneStatus *out) {
  for (int i = 0; i < 4; i++)
    if (!strcmp(s, status_names[i])) {
      *out = (TuneStatus)i;
      return 1;
    }
  return 0;
}

int tune_db_default_path(char *out, size_t n) {
  const char *root = cache_dir(); /* created when missing */
  return root && snprintf(out, n, "%s/tune.db", root) < (int)n;
}

static int fail(TuneDb *db, Diag *d, const char *what) {
  diag_error(d, 0, 0, "tune database %s: %s: %s", db->path, what, sqlite3_errmsg(db->h));
  return 0;
}

static int exec(TuneDb *db, const char *sql, Diag *d) {
  char *err = NULL;
  if (sqlite3_exec(db->h, sql, NULL, NULL, &err) == SQLITE_OK) return 1;
  diag_error(d, 0, 0, "tune database %s: %s", db->path, err ? err : sqlite3_errmsg(db->h));
  sqlite3_free(err);
  return 0;
}

static const char *SCHEMA_SQL =
    "CREATE TABLE IF NOT EXISTS measurement ("
    " id INTEGER PRIMARY KEY, kernel TEXT NOT NULL, bucket TEXT NOT NULL, device TEXT NOT NULL,"
    " compiler TEXT NOT NULL, schedule TEXT NOT NULL, name TEXT NOT NULL, status TEXT NOT NULL,"
    " median_us REAL NOT NULL, min_us REAL NOT NULL, max_us REAL NOT NULL, samples INTEGER NOT NULL,"
    " time INTEGER NOT NULL);"
    "CREATE INDEX IF NOT EXISTS measurement_key ON measurement(kernel, device, compiler, bucket);";

static int user_version(TuneDb *db, int *v, Diag *d) {
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(db->h, "PRAGMA user_version", -1, &st, NULL) != SQLITE_OK) return fail(db, d, "reading");
  int rc = sqlite3_step(st);
  *v = rc == SQLITE_ROW ? sqlite3_column_int(st, 0) : 0;
  sqlite3_finalize(st);
  return rc == SQLITE_ROW ? 1 : fail(db, d, "reading");
}

/* Tables of a schema this lathe does not read (an older one), dropped before creating its own. */
static int drop_all_tables(TuneDb *db, Diag *d) {
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(db->h, "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'", -1,
                         &st, NULL) != SQLITE_OK)
    return fail(db, d, "reading");
  StrBuf sql = {0};
  while (sqlite3_step(st) == SQLITE_ROW) {
    char *q = sqlite3_mprintf("DROP TABLE IF EXISTS \"%w\";", (const char *)sqlite3_column_text(st, 0));
    sb_puts(&sql, q);
    sqlite3_free(q);
  }
  sqlite3_finalize(st);
  int ok = !sql.len || exec(db, sb_str(&sql), d);
  sb_free(&sql);
  return ok;
}

static int has_tables(TuneDb *db, int *yes, Diag *d) {
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(db->h, "SELECT count(*) FROM sqlite_master WHERE type = 'table'", -1, &st, NULL) != SQLITE_OK)
    return fail(db, d, "reading");
  int rc = sqlite3_step(st);
  *yes = rc == SQLITE_ROW && sqlite3_column_int(st, 0) > 0;
  sqlite3_finalize(st);
  return rc == SQLITE_ROW ? 1 : fail(db, d, "reading");
}

/* Creates the schema, or replaces an older one, inside one exclusive transaction (two processes opening a
 * new file at once: the second sees the first's tables). */
static int prepare_schema(TuneDb *db, Diag *d) {
  if (!exec(db, "BEGIN IMMEDIATE", d)) return 0;
  int v, tables, ok = user_version(db, &v, d) && has_tables(db, &tables, d);
  if (ok && v > TUNE_DB_SCHEMA) {
    diag_error(d, 0, 0, "tune database %s has schema %d, newer than this lathe's %d: not used", db->path, v,
               TUNE_DB_SCHEMA);
    ok = 0;
  } else if (ok && v < TUNE_DB_SCHEMA) {
    if (tables) {
      notice(NOTICE_WARNING, "tune database %s has schema %d, not this lathe's %d: replaced (its measurements dropped)",
             db->path, v, TUNE_DB_SCHEMA);
      ok = drop_all_tables(db, d);
    }
    char sql[64];
    snprintf(sql, sizeof sql, "PRAGMA user_version = %d", TUNE_DB_SCHEMA);
    ok = ok && exec(db, SCHEMA_SQL, d) && exec(db, sql, d);
  }
  if (ok) return exec(db, "COMMIT", d);
  sqlite3_exec(db->h, "ROLLBACK", NULL, NULL, NULL);
  return 0;
}

TuneDb *tune_db_open(const char *path, Diag *d) {
  TuneDb *db = xcalloc(1, sizeof *db, "the tune database");
  snprintf(db->path, sizeof db->path, "%s", path);
  if (sqlite3_open_v2(path, &db->h, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOFOLLOW, NULL) !=
      SQLITE_OK) {
    fail(db, d, "cannot open");
    tune_db_close(db);
    return NULL;
  }
  sqlite3_busy_timeout(db->h, 15000);
  /* WAL: readers never block the writer; journal_mode also reads the header (a file that is not a database
   * fails here) */
  /* Two processes making a new file at once: switching it to WAL can answer SQLITE_BUSY at once, without the busy
   * handler, so that is tried again (for up to about 15 s, as the handler would wait) */
  for (int attempt = 0;; attempt++) {
    Diag tried = {0};
    if (exec(db, "PRAGMA journal_mode = WAL", &tried) && exec(db, "PRAGMA synchronous = NORMAL", &tried) &&
        prepare_schema(db, &tried))
      return db;
    int busy = (sqlite3_errcode(db->h) & 0xff) == SQLITE_BUSY || (sqlite3_errcode(db->h) & 0xff) == SQLITE_LOCKED;
    if (!busy || attempt >= 750) {
      *d = d->set ? *d : tried;
      tune_db_close(db);
      return NULL;
    }
    struct timespec nap = {0, 20 * 1000 * 1000};
    nanosleep(&nap, NULL);
  }
}

void tune_db_close(TuneDb *db) {
  if (!db) return;
  sqlite3_close(db->h);
  free(db);
}

int tune_db_add(TuneDb *db, const TuneRecord *r, Diag *d) {
  sqlite3_stmt *st;
  const char *sql = "INSERT INTO measurement (kernel, bucket, device, compiler, schedule, name, status, median_us,"
                    " min_us, max_us, samples, time) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)";
  if (sqlite3_prepare_v2(db->h, sql, -1, &st, NULL) != SQLITE_OK) return fail(db, d, "writing");
  const char *text[] = {
      r->kernel, r->bucket, r->device, r->compiler, r->schedule, r->name, tune_status_name(r->status)};
  for (int i = 0; i < 7; i++) sqlite3_bind_text(st, i + 1, text[i], -1, SQLITE_STATIC);
  sqlite3_bind_double(st, 8, r->median_us);
  sqlite3_bind_double(st, 9, r->min_us);
  sqlite3_bind_double(st, 10, r->max_us);
  sqlite3_bind_int(st, 11, r->samples);
  sqlite3_bind_int64(st, 12, r->time ? r->time : (int64_t)time(NULL));
  int rc = sqlite3_step(st); /* autocommit: one transaction, waiting for another writer */
  sqlite3_finalize(st);
  return rc == SQLITE_DONE ? 1 : fail(db, d, "writing");
}

static void copy_col(char *dst, size_t n, sqlite3_stmt *st, int col) {
  const unsigned char *t = sqlite3_column_text(st, col);
  snprintf(dst, n, "%s", t ? (const char *)t : "");
}

#define COLUMNS "kernel, bucket, device, compiler, schedule, name, status, median_us, min_us, max_us, samples, time"

static void read_row(sqlite3_stmt *st, TuneRecord *r) {
  memset(r, 0, sizeof *r);
  copy_col(r->kernel, sizeof r->kernel, st, 0);
  copy_col(r->bucket, sizeof r->bucket, st, 1);
  copy_col(r->device, sizeof r->device, st, 2);
  copy_col(r->compiler, sizeof r->compiler, st, 3);
  copy_col(r->schedule, sizeof r->schedule, st, 4);
  copy_col(r->name, sizeof r->name, st, 5);
  const unsigned char *s = sqlite3_column_text(st, 6);
  if (!s || !tune_status_parse((const char *)s, &r->status)) r->status = TS_FAULT;
  r->median_us = sqlite3_column_double(st, 7);
  r->min_us = sqlite3_column_double(st, 8);
  r->max_us = sqlite3_column_double(st, 9);
  r->samples = sqlite3_column_int(st, 10);
  r->time = sqlite3_column_int64(st, 11);
}

int tune_db_best(TuneDb *db, const char *kernel, const char *bucket, const char *device, const char *compiler,
                 TuneRecord *out, Diag *d) {
  /* without a bucket: the one of the kernel's latest measurement */
  const char *sql =
      "SELECT " COLUMNS " FROM measurement WHERE kernel = ?1 AND device = ?2 AND compiler = ?3 AND status = 'ok'"
      " AND bucket = coalesce(?4, (SELECT bucket FROM measurement WHERE kernel = ?1 AND device = ?2"
      " AND compiler = ?3 ORDER BY time DESC, id DESC LIMIT 1)) ORDER BY median_us ASC, id ASC LIMIT 1";
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(db->h, sql, -1, &st, NULL) != SQLITE_OK) return fail(db, d, "reading"), -1;
  sqlite3_bind_text(st, 1, kernel, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 2, device, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 3, compiler, -1, SQLITE_STATIC);
  if (bucket) sqlite3_bind_text(st, 4, bucket, -1, SQLITE_STATIC);
  else sqlite3_bind_null(st, 4);
  int rc = sqlite3_step(st), found = rc == SQLITE_ROW;
  if (found) read_row(st, out);
  sqlite3_finalize(st);
  if (rc != SQLITE_ROW && rc != SQLITE_DONE) return fail(db, d, "reading"), -1;
  return found;
}

int tune_db_buckets(TuneDb *db, const char *kernel, const char *device, const char *compiler, char (*out)[128], int max,
                    Diag *d) {
  const char *sql = "SELECT DISTINCT bucket FROM measurement WHERE kernel = ?1 AND device = ?2 AND compiler = ?3"
                    " AND status = 'ok' ORDER BY bucket";
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(db->h, sql, -1, &st, NULL) != SQLITE_OK) return fail(db, d, "reading"), -1;
  sqlite3_bind_text(st, 1, kernel, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 2, device, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 3, compiler, -1, SQLITE_STATIC);
  int n = 0, rc;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW)
    if (n < max) copy_col(out[n++], 128, st, 0);
  sqlite3_finalize(st);
  if (rc != SQLITE_DONE) return fail(db, d, "reading"), -1;
  return n;
}

int tune_db_each(TuneDb *db, int (*fn)(void *ctx, const TuneRecord *r), void *ctx, Diag *d) {
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(db->h, "SELECT " COLUMNS " FROM measurement ORDER BY id", -1, &st, NULL) != SQLITE_OK)
    return fail(db, d, "reading");
  int rc;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    TuneRecord r;
    read_row(st, &r);
    if (!fn(ctx, &r)) {
      rc = SQLITE_DONE;
      break;
    }
  }
  sqlite3_finalize(st);
  return rc == SQLITE_DONE ? 1 : fail(db, d, "reading");
}

static int64_t count_of(TuneDb *db, const char *sql, Diag *d) {
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(db->h, sql, -1, &st, NULL) != SQLITE_OK) return fail(db, d, "reading"), -1;
  int64_t n = sqlite3_step(st) == SQLITE_ROW ? sqlite3_column_int64(st, 0) : -1;
  sqlite3_finalize(st);
  if (n < 0) fail(db, d, "reading");
  return n;
}

int tune_db_stats(TuneDb *db, StrBuf *out, Diag *d) {
  static const char *what[] = {"measurements", "kernels", "devices", "compilers"};
  static const char *sql[] = {"SELECT count(*) FROM measurement", "SELECT count(DISTINCT kernel) FROM measurement",
                              "SELECT count(DISTINCT device) FROM measurement",
                              "SELECT count(DISTINCT compiler) FROM measurement"};
  sb_printf(out, "database %s (schema %d)\n", db->path, TUNE_DB_SCHEMA);
  for (int i = 0; i < 4; i++) {
    int64_t n = count_of(db, sql[i], d);
    if (n < 0) return 0;
    sb_printf(out, "%s: %lld\n", what[i], (long long)n);
  }
  for (int s = TS_OK; s <= TS_TIMEOUT; s++) {
    char q[128];
    snprintf(q, sizeof q, "SELECT count(*) FROM measurement WHERE status = '%s'", status_names[s]);
    int64_t n = count_of(db, q, d);
    if (n < 0) return 0;
    sb_printf(out, "status %s: %lld\n", status_names[s], (long long)n);
  }
  return 1;
}

int tune_db_prune(TuneDb *db, const char *compiler, int *removed, Diag *d) {
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(db->h, "DELETE FROM measurement WHERE compiler <> ?", -1, &st, NULL) != SQLITE_OK)
    return fail(db, d, "writing");
  sqlite3_bind_text(st, 1, compiler, -1, SQLITE_STATIC);
  int rc = sqlite3_step(st);
  sqlite3_finalize(st);
  if (rc != SQLITE_DONE) return fail(db, d, "writing");
  *removed = sqlite3_changes(db->h);
  return exec(db, "PRAGMA wal_checkpoint(TRUNCATE)", d);
}
