/* Schedule spaces: every legal schedule of a kernel (what the tuner searches), and schedules as text
 * (what the tuning database stores and `--ir tile --candidates` prints). */
#ifndef LATHE_TILE_SPACE_H
#define LATHE_TILE_SPACE_H
#include "tile.h"

typedef struct ScheduleSpace {
  Schedule *s; /* s[0] is the default; allocated in the program's arena */
  int n;
} ScheduleSpace;

/* Every legal schedule of kernel k (of p) on dev, from its loop nest and the device: threads per point and
 * reduction strategy, vector width, OpenMP (CPU), register-blocking rows and the axis they block, the
 * blocked variant on CUDA cores (one thread per point or not), as a tensor-core GEMM (split-k fill,
 * library form) or flash attention, and flash-decoding with its key-chunk fill. `def` (the default
 * schedule, as tile_from_loop chose it) comes first; each other candidate passes schedule_check and
 * appears once. mm gives the tensor-core parts the candidates use. */
int schedule_space(const LProgram *p, const LKernel *k, const TargetDesc *dev, MatmulPrecision mm, const Schedule *def,
                   ScheduleSpace *out, Diag *d);
/* Whether s's blocked variant (rows > 1) runs at env's sizes (1 where a size is unknown). */
int schedule_variant_runs(const LKernel *k, const Schedule *s, const SymEnv *env);
/* Keeps one candidate of each set that launches the same kernels at env's sizes (the first, the default
 * first of all): a blocked variant whose rows exceed its axis's extent there never runs, so candidates that
 * differ only in its knobs time the same (a decode step's seq = 1). The order is kept. */
void schedule_space_at(const LKernel *k, const SymEnv *env, Target t, ScheduleSpace *sp);
/* `--ir tile --candidates`: each kernel's space, one schedule a line, after the tile program itself. */
int tile_print_candidates(StrBuf *b, const TileProgram *tp, Diag *d);

/* A schedule as one line of `key=value` words in a fixed order (two schedules are equal exactly when their
 * texts are): red=block threads=256 vec=8 omp=0 rows=8 axis=0 serial=0 mma=2 flash=0 decode=0 dfill=0
 * fill=264 lib=1 romp=0 bfill=0, then svec=N, unroll=N and grows=N only where they are set (not 0) */
void schedule_format(StrBuf *b, const Schedule *s);
/* The inverse of schedule_format (words in any order, missing ones 0 / off); 0 with d naming the word. */
int schedule_parse(const char *text, Schedule *out, Diag *d);
/* Schedules as equal values (every field compared). */
int schedule_equal(const Schedule *a, const Schedule *b);
#endif
