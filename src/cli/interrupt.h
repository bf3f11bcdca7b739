/* Ctrl-C for generate and chat: the first SIGINT only sets interrupt_flag (GenerateOptions.interrupt),
 * so generation stops between tokens and the command goes on; a second one before interrupt_arm() is
 * called again has SIGINT's default effect and ends the process. */
#ifndef LATHE_INTERRUPT_H
#define LATHE_INTERRUPT_H
#include <signal.h>

/* The exit status of a command stopped by Ctrl-C (128 + SIGINT, as a shell reports a killed process). */
enum { EXIT_INTERRUPTED = 130 };

extern volatile sig_atomic_t interrupt_flag;
/* Clears the flag and (re)installs the handler. Blocking reads are not restarted after it runs: a
 * getline or readline waiting at the prompt returns with EINTR. */
void interrupt_arm(void);
#endif
