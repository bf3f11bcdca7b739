/* lathe: compile and run tensor programs through the six-stage pipeline. */
#include <stdio.h>
#include <string.h>
#include "../base/settings.h"
#include "cli.h"
#include "options.h"

#define LATHE_VERSION "0.1.0"

/* The commands: adding one is one line here (and its cmd_NAME function). */
typedef struct Command {
  const char *name;
  int (*run)(int argc, char **argv);
  const char *summary;
} Command;

static const Command commands[] = {
    {"generate", cmd_generate, "complete a prompt with a model (streamed)"},
    {"chat", cmd_chat, "interactive multi-turn chat with the model's chat template"},
    {"bench", cmd_bench, "prefill ms, decode tok/s, % of the bandwidth floor, compile times, memory"},
    {"compile", cmd_compile, "print one stage of a program's or a model's compilation"},
    {"run", cmd_run, "run a program on random inputs; --check compares with a float64 reference"},
    {"pull", cmd_pull, "download a Hugging Face model (or one GGUF file of it) into the model cache"},
    {"quantize", cmd_quantize, "write a model as a GGUF of q8_0, q4_0, q4_1, q4_k_m, q5_k_m or q6_k blocks"},
    {"list", cmd_list, "the cached models; each NAME works as MODEL"},
    {"env", cmd_env, "the environment variables lathe reads, with their current values"},
    {"serve", cmd_serve, "an OpenAI-compatible HTTP server over the batched engine"},
    {"tune", cmd_tune, "measure each kernel's schedules and keep the fastest in the tuning database"},
    {"db", cmd_db, "the tuning database: stats, export FILE, import FILE, prune"},
    {"fit", cmd_fit, "fit the tuner's learned prior to the goldens (--gate: check the built-in one)"},
};
enum { NCOMMANDS = sizeof commands / sizeof commands[0] };

static void usage(FILE *f) {
  fputs("usage: lathe <command> [options]\n"
        "       lathe <command> --help   the command's options and their defaults\n"
        "\ncommands:\n",
        f);
  for (int i = 0; i < NCOMMANDS; i++) fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].summary);
  fprintf(f, "  %-10s %s\n", "help", "this text (help COMMAND: that command's options)");
  fprintf(f, "  %-10s %s\n", "--version", "print the version");
  fputs("\nMODEL (generate, chat, bench) is a Hugging Face model directory, a .gguf file or a cached model's name\n"
        "(lathe list); the default is the model `make model` installs ($LATHE_MODEL overrides).\n"
        "\nenvironment (lathe env shows the current values):\n",
        f);
  for (int i = 0; i < SET_COUNT; i++) {
    const SettingInfo *s = setting_info((SettingId)i);
    fprintf(f, "  %-20s %s\n", s->name, s->doc);
  }
  fputs("\nexit status: 0 ok, 1 --check mismatch, 2 error\n", f);
}

static const Command *find_command(const char *name) {
  for (int i = 0; i < NCOMMANDS; i++)
    if (!strcmp(commands[i].name, name)) return &commands[i];
  return NULL;
}

static void unknown_command(const char *cmd) {
  const char *names[NCOMMANDS + 1];
  char list[256] = "";
  for (int i = 0; i < NCOMMANDS; i++) {
    names[i] = commands[i].name;
    snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "", commands[i].name);
  }
  names[NCOMMANDS] = "help";
  const char *near = nearest_word(cmd, names, NCOMMANDS + 1);
  if (near) report_msg("unknown command '%s' (did you mean %s? commands: %s; see lathe --help)", cmd, near, list);
  else report_msg("unknown command '%s' (commands: %s; see lathe --help)", cmd, list);
}

int main(int argc, char **argv) {
  install_reporting();
  if (argc < 2) {
    usage(stderr);
    return EXIT_ERROR;
  }
  cli_install_notice_sink();
  const char *cmd = argv[1];
  const Command *c = find_command(cmd);
  if (c) return c->run(argc - 1, argv + 1);
  if (!strcmp(cmd, "help") || !strcmp(cmd, "--help") || !strcmp(cmd, "-h")) {
    if (argc > 2) { /* lathe help COMMAND */
      if (!(c = find_command(argv[2]))) {
        unknown_command(argv[2]);
        return EXIT_ERROR;
      }
      char *args[] = {argv[2], "--help", NULL};
      return c->run(2, args);
    }
    usage(stdout);
    return EXIT_OK;
  }
  if (!strcmp(cmd, "--version")) {
    printf("lathe %s\n", LATHE_VERSION);
    return EXIT_OK;
  }
  unknown_command(cmd);
  return EXIT_ERROR;
}
