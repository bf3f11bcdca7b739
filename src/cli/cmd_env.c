/* lathe env: every environment variable lathe reads (the settings table), with its current value; --man
 * prints the table as a man page's ENVIRONMENT section, --json as one object. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "../base/settings.h"
#include "cli.h"
#include "options.h"

/* roff needs leading dots and backslashes escaped */
static void roff(FILE *f, const char *s) {
  if (*s == '.' || *s == '\'') fputs("\\&", f);
  for (; *s; s++) {
    if (*s == '\\') fputs("\\e", f);
    else if (*s == '-') fputs("\\-", f);
    else fputc(*s, f);
  }
}

static const char *default_of(const SettingInfo *s) { return s->def_doc ? s->def_doc : s->def[0] ? s->def : "unset"; }

int cmd_env(int argc, char **argv) {
  int man = 0, json = 0;
  Opt opts[] = {
      {"--man", NULL, OPT_FLAG, NULL, "print the table as a man page's ENVIRONMENT section (roff)", &man},
      {"--json", NULL, OPT_FLAG, NULL, "print one JSON object: name -> {value, default, type, doc}", &json},
  };
  CmdSpec spec = {"env",
                  "[--man | --json]",
                  "The environment variables lathe reads: each with its current value (or its default), its type\n"
                  "and what it does.",
                  opts,
                  2,
                  NULL,
                  NULL,
                  NULL};
  int r = opts_parse(&spec, argc, argv);
  if (r != OPTS_OK) return r == OPTS_HELP ? EXIT_OK : EXIT_ERROR;
  if (man && json) {
    report_msg("give --man or --json, not both");
    return EXIT_ERROR;
  }
  if (json) {
    json_t *o = json_object();
    for (int i = 0; i < SET_COUNT; i++) {
      const SettingInfo *s = setting_info((SettingId)i);
      const char *v = setting_str(s->id);
      if (v && s->secret) v = "(set, not shown)";
      json_object_set_new(o, s->name,
                          json_pack("{s:o, s:s, s:s, s:s, s:s}", "value", v ? json_string(v) : json_null(), "source",
                                    setting_source(s->id), "default", default_of(s), "type", setting_type_name(s->type),
                                    "doc", s->doc));
    }
    char *text = json_dumps(o, JSON_COMPACT);
    puts(text ? text : "{}");
    free(text);
    json_decref(o);
    return EXIT_OK;
  }
  if (man) {
    fputs(".SH ENVIRONMENT\n", stdout);
    for (int i = 0; i < SET_COUNT; i++) {
      const SettingInfo *s = setting_info((SettingId)i);
      printf(".TP\n.B %s\n", s->name);
      roff(stdout, s->doc);
      fputs(" (", stdout);
      roff(stdout, setting_type_name(s->type));
      fputs("; default: ", stdout);
      roff(stdout, default_of(s));
      fputs(")\n", stdout);
    }
    return EXIT_OK;
  }
  for (int i = 0; i < SET_COUNT; i++) {
    const SettingInfo *s = setting_info((SettingId)i);
    const char *v = setting_str(s->id);
    if (v && s->secret) v = "(set, not shown)";
    printf("%s=%s\n    %s (%s; %s%s)\n", s->name, v ? v : "", s->doc, setting_type_name(s->type),
           v ? "default: " : "unset, default: ", default_of(s));
  }
  return EXIT_OK;
}
