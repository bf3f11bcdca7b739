#include "interrupt.h"
#include <string.h>

volatile sig_atomic_t interrupt_flag;

static void on_sigint(int sig) {
  (void)sig;
  interrupt_flag = 1;
}

void interrupt_arm(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_sigint;
  sigemptyset(&sa.sa_mask);
  /* SA_RESETHAND: the handler runs once, then SIGINT is back to its default, so a second Ctrl-C
   * (while a reply winds down, or at a stuck step) ends the process. No SA_RESTART. */
  sa.sa_flags = SA_RESETHAND;
  interrupt_flag = 0;
  sigaction(SIGINT, &sa, NULL);
}
