/* What OpenAI's sampling parameters do to one row of logits beyond the sampler's rule (sampler.h): the
 * presence and frequency penalties, and log-probabilities (the log-softmax of the row) with the most likely
 * tokens. */
#ifndef LATHE_LOGPROBS_H
#define LATHE_LOGPROBS_H
#include <stdint.h>

/* Subtracts presence * [count > 0] + frequency * count from row[t] for every token t that occurs count times in
 * out[0..nout). counts: vocab ints of scratch, all zero, left all zero. */
void logits_apply_penalties(float *row, int vocab, const int32_t *out, int nout, double presence, double frequency,
                            int *counts);
/* log(sum(exp(row))), computed stably in double: row[t] minus it is token t's log-probability. NaN logits count
 * as -inf; -inf when no logit is finite or +inf. */
double logits_log_normalizer(const float *row, int n);
/* The k (at most n) token ids with the largest logits, largest first, ties by the smaller id; returns k. */
int logits_top(const float *row, int n, int k, int32_t *ids);
#endif
