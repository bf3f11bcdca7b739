/* A table-driven option parser: each command declares its flags once (name, short name, argument,
 * default, help) and both parsing and `lathe COMMAND --help` read that table. */
#ifndef LATHE_OPTIONS_H
#define LATHE_OPTIONS_H
#include <stdio.h>

typedef enum OptKind {
  OPT_FLAG, /* no argument: *(int *)dest = 1 */
  OPT_STR,  /* *(const char **)dest = the argument */
  OPT_INT,  /* *(int *)dest, an integer in [lo, hi] */
  OPT_NUM,  /* *(double *)dest, a number in [lo, hi] */
  OPT_CALL, /* call(dest, name, argument): repeated or structured arguments */
} OptKind;

typedef struct Opt {
  const char *name; /* "--prompt" */
  const char *shrt; /* "-p", or NULL */
  OptKind kind;
  const char *arg;  /* the argument's name in help ("TEXT"); NULL for a flag */
  const char *help; /* one line (may be longer: wrapped by the terminal) */
  void *dest;
  double lo, hi;   /* OPT_INT and OPT_NUM */
  const char *def; /* the default as help shows it; NULL: read from *dest, "" shows none */
  int (*call)(void *dest, const char *name, const char *arg); /* OPT_CALL; returns 0 after reporting */
  int seen;                                                   /* set by the parser: how many times it was given */
} Opt;

typedef struct CmdSpec {
  const char *name;    /* "generate" */
  const char *usage;   /* after "lathe NAME ": "[MODEL] --prompt TEXT [options]" */
  const char *summary; /* what the command does, one or more lines */
  Opt *opts;
  int nopts;
  const char *positional; /* "MODEL", or NULL when the command takes none */
  const char **pos;       /* where the positional goes */
  const char *notes;      /* printed after the options, or NULL */
} CmdSpec;

enum { OPTS_ERROR = 0, OPTS_OK = 1, OPTS_HELP = 2 };
/* Parses argv[1..argc-1] (argv[0] is the command). Reports a usage error and returns OPTS_ERROR; prints
 * the help to stdout and returns OPTS_HELP on -h or --help; else OPTS_OK. */
int opts_parse(CmdSpec *c, int argc, char **argv);
void opts_help(const CmdSpec *c, FILE *f);
/* The option of c named `name` (long form), or NULL. */
Opt *opts_find(CmdSpec *c, const char *name);
/* Times `name` was given (0 when not, or when c has no such option). */
int opts_seen(CmdSpec *c, const char *name);

/* Levenshtein distance between two strings. */
int edit_distance(const char *a, const char *b);
/* The candidate nearest to word, when it is near enough to be a likely typo; else NULL. */
const char *nearest_word(const char *word, const char *const *cands, int n);
#endif
