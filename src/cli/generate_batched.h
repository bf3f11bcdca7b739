/* lathe generate --concurrency: one request per prompt line through the batched engine. */
#ifndef LATHE_CLI_GENERATE_BATCHED_H
#define LATHE_CLI_GENERATE_BATCHED_H
#include "gen_common.h"

/* Completes every non-empty line of a->prompt (already read); an exit status. */
int generate_batched(GenArgs *a);
#endif
