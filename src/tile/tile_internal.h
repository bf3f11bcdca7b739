/* Internal to the tile stage (schedule.c, choice.c). */
#ifndef LATHE_TILE_INTERNAL_H
#define LATHE_TILE_INTERNAL_H
#include "tile.h"

/* The kinds s makes of k. strict: a kind the matchers refuse is an error (d says why); otherwise
 * (the default schedules' proposals) it is dropped from s. */
int tile_choose_kinds(const LProgram *p, const LKernel *k, const TargetDesc *dev, Schedule *s, TileChoice *c,
                      int strict, Diag *d);
void tile_link_attention(TileProgram *tp);
TileProgram *tile_new(const LProgram *p, const TargetDesc *dev, const FusionPolicy *fusion, MatmulPrecision mm);
/* The knobs' own ranges (schedule_check without the matchers). */
int tile_knobs_check(const LKernel *k, const TargetDesc *dev, const Schedule *s, Diag *d);
/* Some reduction streams a buffer independent of parallel variable var (register blocking over var
 * reads it once for several rows). */
int tile_streams_independent_of(const LKernel *k, int var);
#endif
