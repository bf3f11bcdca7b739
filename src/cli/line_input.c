#include "line_input.h"
#include <editline/readline.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

void line_input_open(LineInput *in) {
  memset(in, 0, sizeof *in);
  in->edit = isatty(0);
  if (!in->edit) return;
  rl_readline_name = "lathe"; /* "lathe:" lines of ~/.editrc apply */
  /* stdout may be a pipe (`lathe chat | tee log`): the prompt and the editing go to the terminal */
  rl_outstream = isatty(1) ? stdout : stderr;
  using_history();
}

static void strip_eol(char *s) {
  size_t n = strlen(s);
  while (n && (s[n - 1] == '\n' || s[n - 1] == '\r')) s[--n] = 0;
}

const char *line_input_read(LineInput *in, const char *prompt) {
  if (in->edit) {
    free(in->line);
    fflush(stdout);
    in->line = readline(prompt);
    if (!in->line) return NULL;
    strip_eol(in->line);
    /* one history entry per distinct line (repeating the last one adds nothing) */
    HIST_ENTRY *last = history_length > 0 ? history_get(history_base + history_length - 1) : NULL;
    if (in->line[0] && !(last && last->line && !strcmp(last->line, in->line))) add_history(in->line);
    return in->line;
  }
  if (getline(&in->line, &in->cap, stdin) < 0) return NULL;
  strip_eol(in->line);
  return in->line;
}

int line_input_editing(const LineInput *in) { return in->edit; }

void line_input_close(LineInput *in) {
  if (in->edit) clear_history();
  free(in->line);
  memset(in, 0, sizeof *in);
}
