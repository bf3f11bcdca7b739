/* Monotonic wall-clock time, for timings printed to users and benchmarks. */
#ifndef LATHE_CLOCK_H
#define LATHE_CLOCK_H
double now_ms(void);
#endif
