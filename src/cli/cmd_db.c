/* lathe db: the tuning database (stats, export FILE, import FILE, prune). */
#include <stdio.h>
#include <string.h>
#include "../tune/db.h"
#include "../tune/key.h"
#include "cli.h"
#include "options.h"

/* The database file: --db, else tune.db in the cache directory. */
int cli_tune_db_path(const char *given, char *out, size_t n) {
  if (given) return snprintf(out, n, "%s", given) < (int)n;
  if (tune_db_default_path(out, n)) return 1;
  report_msg("no cache directory for the tune database (set LATHE_CACHE_DIR or HOME, or give --db FILE)");
  return 0;
}

int cmd_db(int argc, char **argv) {
  const char *db_path = NULL, *file = NULL;
  Opt opts[] = {{"--db", NULL, OPT_STR, "FILE", "the database (default: tune.db in the cache directory)", &db_path}};
  static const char *actions[] = {"stats", "export", "import", "prune"};
  CmdSpec spec = {"db",
                  "(stats | export FILE | import FILE | prune) [--db FILE]",
                  "The tuning database lathe tune writes: stats counts its measurements; export writes them as JSON;\n"
                  "import adds a JSON file's; prune removes those of other lathe versions (never used).",
                  opts,
                  1,
                  "FILE",
                  &file,
                  NULL};
  const char *action = argc > 1 ? argv[1] : NULL;
  int which = -1;
  for (int i = 0; action && i < 4; i++)
    if (!strcmp(action, actions[i])) which = i;
  if (which < 0) {
    int r = opts_parse(&spec, argc, argv); /* --help, or a usage error */
    if (r == OPTS_HELP) return EXIT_OK;
    if (r == OPTS_OK) report_msg("lathe db needs an action: stats, export FILE, import FILE or prune");
    return EXIT_ERROR;
  }
  int r = opts_parse(&spec, argc - 1, argv + 1);
  if (r != OPTS_OK) return r == OPTS_HELP ? EXIT_OK : EXIT_ERROR;
  if ((which == 1 || which == 2) != (file != NULL)) {
    report_msg(file ? "lathe db %s takes no FILE" : "lathe db %s needs a FILE", actions[which]);
    return EXIT_ERROR;
  }
  char path[1024];
  if (!cli_tune_db_path(db_path, path, sizeof path)) return EXIT_ERROR;
  Diag d = {0};
  TuneDb *db = tune_db_open(path, &d);
  if (!db) {
    report(&d, NULL);
    return EXIT_ERROR;
  }
  int ok = 1, n = 0;
  StrBuf b = {0};
  switch (which) {
  case 0: ok = tune_db_stats(db, &b, &d); break;
  case 1:
    if ((ok = tune_db_export(db, file, &n, &d))) sb_printf(&b, "exported %d measurements to %s\n", n, file);
    break;
  case 2:
    if ((ok = tune_db_import(db, file, &n, &d))) sb_printf(&b, "imported %d measurements from %s\n", n, file);
    break;
  default:
    if ((ok = tune_db_prune(db, TUNE_COMPILER_IDENTITY, &n, &d)))
      sb_printf(&b, "removed %d measurements of other lathe versions\n", n);
  }
  tune_db_close(db);
  if (!ok) report(&d, NULL);
  else fputs(sb_str(&b), stdout);
  sb_free(&b);
  return ok ? EXIT_OK : EXIT_ERROR;
}
