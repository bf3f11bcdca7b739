#include "options.h"
#include "../base/mem.h"
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "cli.h"

int edit_distance(const char *a, const char *b) {
  size_t n = strlen(b);
  int *row = xmalloc(sizeof(int) * (n + 1), "the option suggestion");
  for (size_t j = 0; j <= n; j++) row[j] = (int)j;
  for (size_t i = 1; a[i - 1]; i++) {
    int diag = row[0];
    row[0] = (int)i;
    for (size_t j = 1; j <= n; j++) {
      int up = row[j], best = diag + (a[i - 1] != b[j - 1]);
      if (up + 1 < best) best = up + 1;
      if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
      diag = up;
      row[j] = best;
    }
  }
  int d = row[n];
  free(row);
  return d;
}

const char *nearest_word(const char *word, const char *const *cands, int n) {
  const char *best = NULL;
  int best_d = 0;
  for (int i = 0; i < n; i++) {
    int d = edit_distance(word, cands[i]);
    if (!best || d < best_d) best = cands[i], best_d = d;
  }
  /* a typo, not a different word: at most a third of the word's letters (and at least 2) */
  int len = (int)strlen(word), limit = len / 3 > 2 ? len / 3 : 2;
  return best && best_d <= limit ? best : NULL;
}

Opt *opts_find(CmdSpec *c, const char *name) {
  for (int i = 0; i < c->nopts; i++)
    if (!strcmp(c->opts[i].name, name)) return &c->opts[i];
  return NULL;
}

int opts_seen(CmdSpec *c, const char *name) {
  Opt *o = opts_find(c, name);
  return o ? o->seen : 0;
}

static Opt *lookup(CmdSpec *c, const char *word, size_t len) {
  for (int i = 0; i < c->nopts; i++) {
    Opt *o = &c->opts[i];
    if ((strlen(o->name) == len && !strncmp(o->name, word, len)) ||
        (o->shrt && strlen(o->shrt) == len && !strncmp(o->shrt, word, len)))
      return o;
  }
  return NULL;
}

static void unknown_option(CmdSpec *c, const char *word) {
  const char *names[64];
  int n = 0;
  for (int i = 0; i < c->nopts && n < 62; i++) names[n++] = c->opts[i].name;
  names[n++] = "--help";
  const char *near = nearest_word(word, names, n);
  if (near)
    report_msg("unknown option '%s' for %s (did you mean %s? see lathe %s --help)", word, c->name, near, c->name);
  else report_msg("unknown option '%s' for %s (see lathe %s --help)", word, c->name, c->name);
}

static int set_value(CmdSpec *c, Opt *o, const char *arg) {
  char *end;
  errno = 0;
  switch (o->kind) {
  case OPT_FLAG: *(int *)o->dest = 1; return 1;
  case OPT_STR: *(const char **)o->dest = arg; return 1;
  case OPT_CALL: return o->call(o->dest, o->name, arg);
  case OPT_INT: {
    long long v = strtoll(arg, &end, 10);
    if (errno || end == arg || *end || v < o->lo || v > o->hi) {
      report_msg("%s expects an integer in [%.0f, %.0f], got '%s'", o->name, o->lo, o->hi, arg);
      return 0;
    }
    *(int *)o->dest = (int)v;
    return 1;
  }
  case OPT_NUM: {
    double v = strtod(arg, &end);
    if (errno || end == arg || *end || !(v >= o->lo && v <= o->hi)) {
      report_msg("%s expects a number in [%g, %g], got '%s'", o->name, o->lo, o->hi, arg);
      return 0;
    }
    *(double *)o->dest = v;
    return 1;
  }
  }
  (void)c;
  return 0;
}

int opts_parse(CmdSpec *c, int argc, char **argv) {
  for (int i = 0; i < c->nopts; i++) c->opts[i].seen = 0;
  int npos = 0;
  for (int i = 1; i < argc; i++) {
    const char *w = argv[i];
    if (!strcmp(w, "-h") || !strcmp(w, "--help")) {
      opts_help(c, stdout);
      return OPTS_HELP;
    }
    if (w[0] != '-' || !w[1]) { /* a positional ("-" alone is one too: standard input) */
      if (c->positional && npos == 0) {
        *c->pos = w;
        npos++;
        continue;
      }
      if (c->positional)
        report_msg("unexpected argument '%s': %s takes one %s (already '%s'); quote text that has spaces", w, c->name,
                   c->positional, *c->pos);
      else
        report_msg("unexpected argument '%s': %s takes no positional arguments (see lathe %s --help)", w, c->name,
                   c->name);
      return OPTS_ERROR;
    }
    const char *eq = !strncmp(w, "--", 2) ? strchr(w, '=') : NULL;
    size_t len = eq ? (size_t)(eq - w) : strlen(w);
    Opt *o = lookup(c, w, len);
    if (!o) {
      char name[128];
      snprintf(name, sizeof name, "%.*s", (int)len, w);
      unknown_option(c, name);
      return OPTS_ERROR;
    }
    const char *arg = NULL;
    if (o->kind != OPT_FLAG) {
      if (eq) arg = eq + 1;
      else if (i + 1 < argc) arg = argv[++i];
      else {
        report_msg("%s needs an argument (%s); see lathe %s --help", o->name, o->arg ? o->arg : "a value", c->name);
        return OPTS_ERROR;
      }
    } else if (eq) {
      report_msg("%s takes no argument", o->name);
      return OPTS_ERROR;
    }
    o->seen++;
    if (!set_value(c, o, arg)) return OPTS_ERROR;
  }
  return OPTS_OK;
}

/* The default as help prints it ("" when none). */
static void default_text(const Opt *o, char *out, size_t n) {
  out[0] = 0;
  if (o->def) snprintf(out, n, "%s", o->def);
  else if (o->kind == OPT_INT) snprintf(out, n, "%d", *(const int *)o->dest);
  else if (o->kind == OPT_NUM) snprintf(out, n, "%g", *(const double *)o->dest);
  else if (o->kind == OPT_STR && *(const char *const *)o->dest) snprintf(out, n, "%s", *(const char *const *)o->dest);
}

enum { HELP_INDENT = 31, HELP_WIDTH = 110 };

/* Prints text from column `col` on, wrapped at HELP_WIDTH with continuation lines at HELP_INDENT. */
static void wrapped(FILE *f, int col, const char *text) {
  while (*text) {
    size_t room = (size_t)(HELP_WIDTH - col), n = strlen(text);
    if (n > room) { /* break at the last space that fits (or the first one after) */
      n = room;
      while (n > 0 && text[n] != ' ') n--;
      if (!n) n = strcspn(text, " ");
    }
    for (size_t i = 0; i < n; i++) fputc(text[i] == '\1' ? ' ' : text[i], f); /* \1: a space not to break at */
    text += n;
    while (*text == ' ') text++;
    if (*text) fprintf(f, "\n%*s", HELP_INDENT, ""), col = HELP_INDENT;
  }
  fputc('\n', f);
}

void opts_help(const CmdSpec *c, FILE *f) {
  fprintf(f, "usage: lathe %s %s\n\n%s\n", c->name, c->usage, c->summary);
  fputs("\noptions:\n", f);
  for (int i = 0; i < c->nopts; i++) {
    const Opt *o = &c->opts[i];
    char left[96], def[160], text[640];
    snprintf(left, sizeof left, "%s%s%s%s%s", o->shrt ? o->shrt : "", o->shrt ? ", " : "    ", o->name,
             o->arg ? " " : "", o->arg ? o->arg : "");
    default_text(o, def, sizeof def);
    snprintf(text, sizeof text, "%s%s%s%s", o->help, def[0] ? " (default:\1" : "", def, def[0] ? ")" : "");
    if (strlen(def) < 30) /* a short default stays on one line with its "(default:" */
      for (char *p = strstr(text, "(default:"); p && *p; p++)
        if (*p == ' ') *p = '\1';
    int col = HELP_INDENT;
    if (strlen(left) > 28) fprintf(f, "  %s\n%*s", left, HELP_INDENT, "");
    else fprintf(f, "  %-28s ", left);
    wrapped(f, col, text);
  }
  fprintf(f, "  %-28s %s\n", "-h, --help", "print this help and exit");
  if (c->notes) fprintf(f, "\n%s\n", c->notes);
}
