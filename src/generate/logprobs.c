/* Penalties and log-probabilities over a row of logits (logprobs.h). */
#include "logprobs.h"
#include <math.h>

void logits_apply_penalties(float *row, int vocab, const int32_t *out, int nout, double presence, double frequency,
                            int *counts) {
  for (int k = 0; k < nout; k++)
    if (out[k] >= 0 && out[k] < vocab) counts[out[k]]++;
  for (int k = 0; k < nout; k++) { /* the first occurrence applies the token's whole penalty and clears its count */
    int32_t t = out[k];
    if (t < 0 || t >= vocab || !counts[t]) continue;
    row[t] = (float)((double)row[t] - presence - frequency * counts[t]);
    counts[t] = 0;
  }
}

double logits_log_normalizer(const float *row, int n) {
  double mx = -INFINITY;
  for (int i = 0; i < n; i++)
    if (row[i] > mx) mx = row[i]; /* NaN compares false */
  if (!isfinite(mx)) return mx;
  double sum = 0;
  for (int i = 0; i < n; i++)
    if (row[i] == row[i]) sum += exp((double)row[i] - mx);
  return mx + log(sum);
}

/* whether a ranks before b */
static int before(const float *row, int32_t a, int32_t b) {
  float x = row[a] == row[a] ? row[a] : -INFINITY, y = row[b] == row[b] ? row[b] : -INFINITY;
  return x > y || (x == y && a < b);
}

int logits_top(const float *row, int n, int k, int32_t *ids) {
  if (k > n) k = n;
  if (k <= 0) return 0;
  int have = 0;
  for (int32_t i = 0; i < n; i++) { /* insertion into the k best so far: k is small (at most 20) */
    if (have == k && !before(row, i, ids[k - 1])) continue;
    int at = have < k ? have++ : k - 1;
    while (at > 0 && before(row, i, ids[at - 1])) {
      ids[at] = ids[at - 1];
      at--;
    }
    ids[at] = i;
  }
  return k;
}
