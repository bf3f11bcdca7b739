/* The command line's table-driven option parser (cli/options.h): flags, typed values and their ranges,
 * --name=value, repeated options, positionals, errors that suggest the nearest flag, and the help that
 * prints every flag with its default from the same table. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include "testutil.h"
#include "cli/options.h"

typedef struct Args {
  int flag, n;
  double x;
  const char *s, *pos;
  int calls;
  const char *last;
} Args;

static int collect(void *dest, const char *name, const char *arg) {
  Args *a = dest;
  (void)name;
  a->calls++;
  a->last = arg;
  return strcmp(arg, "bad") != 0;
}

static Opt opts_of(Args *a, int i) {
  Opt all[] = {
      {"--flag", "-F", OPT_FLAG, NULL, "a flag", &a->flag},
      {"--count", "-n", OPT_INT, "N", "a count", &a->n, 0, 100},
      {"--ratio", NULL, OPT_NUM, "X", "a ratio", &a->x, 0, 1},
      {"--name", NULL, OPT_STR, "TEXT", "a name", &a->s},
      {"--stop", NULL, OPT_CALL, "STR", "repeatable", a, .call = collect},
      {"--prompt", "-p", OPT_STR, "TEXT", "the prompt", &a->s, .def = "none given"},
  };
  return all[i];
}

enum { NOPTS = 6 };

typedef struct Fixture {
  Args a;
  Opt opts[NOPTS];
  CmdSpec spec;
} Fixture;

static CmdSpec *fixture(Fixture *f) {
  memset(f, 0, sizeof *f);
  f->a.n = 7;
  f->a.x = 0.5;
  for (int i = 0; i < NOPTS; i++) f->opts[i] = opts_of(&f->a, i);
  f->spec = (CmdSpec){"demo", "[FILE] [options]", "A demo command.", f->opts, NOPTS, "FILE", &f->a.pos, "notes"};
  return &f->spec;
}

/* Runs the parser with stderr in a temporary file; returns the result, *err gets stderr's first line. */
static int parse(CmdSpec *c, char *err, size_t n, int argc, char **argv) {
  fflush(stderr);
  FILE *t = tmpfile();
  int saved = dup(2);
  dup2(fileno(t), 2);
  int r = opts_parse(c, argc, argv);
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
  rewind(t);
  err[0] = 0;
  if (!fgets(err, (int)n, t)) err[0] = 0;
  fclose(t);
  return r;
}

#define ARGV(...) ((char *[]){"demo", __VA_ARGS__, NULL})
#define ARGC(...) ((int)(sizeof((char *[]){"demo", __VA_ARGS__}) / sizeof(char *)))
#define PARSE(c, err, ...) parse(c, err, sizeof err, ARGC(__VA_ARGS__), ARGV(__VA_ARGS__))

static void values_and_positional(void **state) {
  (void)state;
  Fixture f;
  CmdSpec *c = fixture(&f);
  char err[512];
  assert_int_equal(PARSE(c, err, "-F", "--count", "42", "--ratio=0.25", "file.lt", "--stop", "a", "--stop", "b"),
                   OPTS_OK);
  assert_int_equal(f.a.flag, 1);
  assert_int_equal(f.a.n, 42);
  assert_true(f.a.x == 0.25);
  assert_string_equal(f.a.pos, "file.lt");
  assert_int_equal(f.a.calls, 2);
  assert_string_equal(f.a.last, "b");
  assert_int_equal(opts_seen(c, "--stop"), 2);
  assert_int_equal(opts_seen(c, "--name"), 0);
  assert_int_equal(opts_seen(c, "--nonexistent"), 0);
  /* an argument that starts with '-' is still the option's argument */
  assert_int_equal(PARSE(c, err, "--name", "-x", "-p", "-"), OPTS_OK);
  assert_string_equal(f.a.s, "-");
  assert_int_equal(PARSE(c, err, "-n", "3"), OPTS_OK);
  assert_int_equal(f.a.n, 3);
}

static void errors(void **state) {
  (void)state;
  Fixture f;
  CmdSpec *c = fixture(&f);
  char err[512];
  assert_int_equal(PARSE(c, err, "--count", "101"), OPTS_ERROR);
  assert_contains(err, "--count expects an integer in [0, 100], got '101'");
  assert_int_equal(PARSE(c, err, "--ratio", "x"), OPTS_ERROR);
  assert_contains(err, "--ratio expects a number in [0, 1], got 'x'");
  assert_int_equal(PARSE(c, err, "--prmpt", "hi"), OPTS_ERROR);
  assert_contains(err, "unknown option '--prmpt' for demo (did you mean --prompt?");
  assert_int_equal(PARSE(c, err, "--zzzzzzzz"), OPTS_ERROR);
  assert_contains(err, "unknown option '--zzzzzzzz' for demo (see lathe demo --help)");
  assert_int_equal(PARSE(c, err, "--name"), OPTS_ERROR);
  assert_contains(err, "--name needs an argument (TEXT)");
  assert_int_equal(PARSE(c, err, "--flag=1"), OPTS_ERROR);
  assert_contains(err, "--flag takes no argument");
  assert_int_equal(PARSE(c, err, "a", "b"), OPTS_ERROR);
  assert_contains(err, "unexpected argument 'b'");
  assert_int_equal(PARSE(c, err, "--stop", "bad"), OPTS_ERROR);
  c->positional = NULL;
  assert_int_equal(PARSE(c, err, "a"), OPTS_ERROR);
  assert_contains(err, "takes no positional arguments");
}

static void help_from_the_table(void **state) {
  (void)state;
  Fixture f;
  CmdSpec *c = fixture(&f);
  char buf[4096] = "";
  FILE *m = fmemopen(buf, sizeof buf - 1, "w");
  opts_help(c, m);
  fclose(m);
  assert_contains(buf, "usage: lathe demo [FILE] [options]");
  assert_contains(buf, "-F, --flag");
  assert_contains(buf, "-n, --count N");
  assert_contains(buf, "a count (default: 7)"); /* read from the destination's initial value */
  assert_contains(buf, "a ratio (default: 0.5)");
  assert_contains(buf, "the prompt (default: none given)"); /* the declared text */
  assert_contains(buf, "-h, --help");
  assert_contains(buf, "notes");
  assert_null(strstr(buf, "a name (default")); /* a NULL string has no default */
  /* -h prints the help on stdout and says so */
  fflush(stdout);
  FILE *t = tmpfile();
  int saved = dup(1);
  dup2(fileno(t), 1);
  char err[256];
  int r = PARSE(c, err, "--count", "1", "-h");
  fflush(stdout);
  dup2(saved, 1);
  close(saved);
  fclose(t);
  assert_int_equal(r, OPTS_HELP);
}

static void nearest(void **state) {
  (void)state;
  assert_int_equal(edit_distance("", ""), 0);
  assert_int_equal(edit_distance("kitten", "sitting"), 3);
  assert_int_equal(edit_distance("--promt", "--prompt"), 1);
  assert_int_equal(edit_distance("abc", ""), 3);
  const char *cmds[] = {"generate", "chat", "bench", "compile", "run", "env"};
  assert_string_equal(nearest_word("generat", cmds, 6), "generate");
  assert_string_equal(nearest_word("cmopile", cmds, 6), "compile");
  assert_string_equal(nearest_word("rnu", cmds, 6), "run");
  assert_null(nearest_word("frobnicate", cmds, 6));
  assert_null(nearest_word("x", cmds, 0));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(values_and_positional),
      cmocka_unit_test(errors),
      cmocka_unit_test(help_from_the_table),
      cmocka_unit_test(nearest),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
