/* lathe tune: (filled in by the next step) */
#include "cli.h"
int cmd_tune(int argc, char **argv) {
  (void)argc, (void)argv;
  report_msg("lathe tune is not built yet");
  return EXIT_ERROR;
}
