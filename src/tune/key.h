/* What a measurement is keyed by: the kernel's structural identity, its symbols' bucketed values, the device
 * and lathe's compiler identity (tune/db.h stores them). */
#ifndef LATHE_TUNE_KEY_H
#define LATHE_TUNE_KEY_H
#include <stddef.h>
#include "../tile/tile.h"

/* Bumped whenever the code a schedule produces changes meaning (a knob added or reinterpreted, the kernel
 * stage rewritten): measurements of another identity are never used (lathe db prune removes them). */
#define TUNE_COMPILER_IDENTITY "lathe-0.1.0/schedule-2" /* 2: a measurement times the kernel alone */

/* 16 hex digits: a hash of k's loop nest (axes and their extents, reductions, bodies, the store) with its
 * buffers named by order of first use, dtype and shape, and the matmul precision. Two kernels of the same
 * structure (the layers of a model) share it, whatever their names. */
void tune_kernel_key(const LProgram *p, const LKernel *k, MatmulPrecision mm, char out[24]);
/* The symbols k's nest depends on with their values rounded up to a power of two, sorted by name:
 * "past=256 seq=1" ("" when it has none; a symbol env lacks is "NAME=?"). */
void tune_kernel_bucket(const LProgram *p, const LKernel *k, const SymEnv *env, char *out, size_t n);
/* The device a measurement is for. CUDA: name, compute capability, multiprocessors, memory clock and bus,
 * driver version (driver: 0 when unknown); CPU: the processor's model name (/proc/cpuinfo) and cores. */
void tune_device_identity(const TargetDesc *t, int driver, char *out, size_t n);
#endif
