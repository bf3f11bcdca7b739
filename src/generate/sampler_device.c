/* Sampling on the GPU: sampler.h's rule as one CUDA kernel over the logits a plan left on the device,
 * so a sampled decode step copies back 4 bytes instead of the vocabulary's logits.
 *
 * One block of 1024 threads, in sweeps over the logits (8 loads in flight per thread: one block has
 * few warps to hide latency with):
 *   - the maximum;
 *   - top-k (k <= 1024): a histogram of each logit's distance below the maximum in 1/64 steps, then
 *     the logits down to the bin where the count reaches k are gathered into shared memory, where the
 *     exact k-th largest key, the top-p threshold (the largest weight whose mass at or above it
 *     reaches top_p of the total) and the draw (kept weights in vocabulary order) are found without
 *     touching the other logits again;
 *   - otherwise (no top-k, k > 1024, or too many ties to gather): radix selection, 8 bits of the
 *     order-preserving key (top-k) or of the weight's bits (top-p) per sweep, with 256-bin histograms
 *     in shared memory where the lanes of a warp that hit the same bin add their amounts first (most
 *     logits share their top bits: one atomic per element made a step cost 1.5 ms); then each thread
 *     sums the kept weights of its contiguous slice, a scan over the threads finds the slice holding
 *     u * total, and that thread walks its slice.
 * Weights are 40-bit fixed point (sampler.h), so the integer sums give the same token on every run. */
#include "sampler_device.h"
#include "../base/mem.h"
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static const char sampler_source[] =
    "typedef long long i64;\n"
    "typedef unsigned long long u64;\n"
    "#define NT 1024\n"
    "#define FULL 0xffffffffu\n"
    "#define U 8 /* loads in flight per thread: one block has few warps to hide latency with */\n"
    "/* body for each of the U elements i (value v) of this thread in a block-strided sweep; every lane\n"
    "   runs the same iterations (warp-wide intrinsics inside), i >= n marks a lane with no element */\n"
    "#define LT_SWEEP(body) \\\n"
    "  for (i64 base = 0; base < n; base += (i64)NT * U) { \\\n"
    "    float vs[U]; \\\n"
    "    _Pragma(\"unroll\") for (int j = 0; j < U; j++) { const i64 i = base + (i64)j * NT + tid; vs[j] = i < n ? logits[i] : 0.0f; } \\\n"
    "    _Pragma(\"unroll\") for (int j = 0; j < U; j++) { const i64 i = base + (i64)j * NT + tid; const float v = vs[j]; body } \\\n"
    "  }\n"
    "static __device__ __forceinline__ unsigned int lt_key(float f) {\n"
    "  unsigned int x = __float_as_uint(f);\n"
    "  if (f != f) return 0u;\n"
    "  return (x & 0x80000000u) ? ~x : x | 0x80000000u;\n"
    "}\n"
    "static __device__ __forceinline__ float lt_bits_f(i64 b) { return __int_as_float((int)b); }\n"
    "/* hist[bin] += w for the lanes where valid, one atomic per distinct bin of the warp: the lanes of\n"
    "   a bin add their amounts first (in two 32-bit pieces: w < 2^41). Every lane of the warp calls it. */\n"
    "static __device__ __forceinline__ void lt_hist_add(u64 *hist, int valid, unsigned int bin, u64 w) {\n"
    "  const unsigned int peers = __match_any_sync(FULL, valid ? bin : 256u);\n"
    "  const unsigned int a = __reduce_add_sync(peers, (unsigned int)(w & 0x7ffffffull));\n"
    "  const unsigned int b = __reduce_add_sync(peers, (unsigned int)(w >> 27));\n"
    "  if (valid && (threadIdx.x & 31) == __ffs(peers) - 1) atomicAdd(&hist[bin], (u64)a + ((u64)b << 27));\n"
    "}\n"
    "/* Inclusive scan of v over the block's threads; *total gets the block's sum. */\n"
    "static __device__ u64 lt_block_scan(u64 v, u64 *red, u64 *total) {\n"
    "  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;\n"
    "  for (int o = 1; o < 32; o <<= 1) {\n"
    "    const u64 y = __shfl_up_sync(FULL, v, o);\n"
    "    if (lane >= o) v += y;\n"
    "  }\n"
    "  __syncthreads();\n"
    "  if (lane == 31) red[warp] = v;\n"
    "  __syncthreads();\n"
    "  if (warp == 0) {\n"
    "    u64 w = red[lane];\n"
    "    for (int o = 1; o < 32; o <<= 1) {\n"
    "      const u64 y = __shfl_up_sync(FULL, w, o);\n"
    "      if (lane >= o) w += y;\n"
    "    }\n"
    "    red[lane] = w;\n"
    "  }\n"
    "  __syncthreads();\n"
    "  *total = red[31];\n"
    "  return v + (warp ? red[warp - 1] : 0);\n"
    "}\n"
    "/* The block's maximum of v (every thread gets it). */\n"
    "static __device__ unsigned int lt_block_max(unsigned int v, u64 *red) {\n"
    "  v = __reduce_max_sync(FULL, v);\n"
    "  __syncthreads();\n"
    "  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = v;\n"
    "  __syncthreads();\n"
    "  unsigned int m = 0u;\n"
    "  for (int w = 0; w < NT / 32; w++) m = max(m, (unsigned int)red[w]);\n"
    "  return m;\n"
    "}\n"
    "/* The digit of one radix-selection pass: walking the bins from the top, the first b where the amount\n"
    "   above it plus its own reaches *need (or b = 0); *need loses the amount above. Warp 0 does it: lane l\n"
    "   holds bins 255 - 8l down to 248 - 8l. */\n"
    "static __device__ void lt_select_digit(const u64 *hist, unsigned int *prefix, u64 *need, int shift) {\n"
    "  __syncthreads();\n"
    "  if (threadIdx.x < 32) {\n"
    "    const int lane = threadIdx.x, top = 255 - 8 * lane;\n"
    "    u64 cs = 0;\n"
    "    for (int b = top; b > top - 8; b--) cs += hist[b];\n"
    "    u64 incl = cs;\n"
    "    for (int o = 1; o < 32; o <<= 1) {\n"
    "      const u64 y = __shfl_up_sync(FULL, incl, o);\n"
    "      if (lane >= o) incl += y;\n"
    "    }\n"
    "    const u64 want = *need;\n"
    "    const unsigned int reach = __ballot_sync(FULL, incl >= want);\n"
    "    const int at = reach ? __ffs(reach) - 1 : 31;\n"
    "    if (lane == at) {\n"
    "      u64 above = incl - cs;\n"
    "      int b = top;\n"
    "      while (b > 0 && above + hist[b] < want) above += hist[b--];\n"
    "      *prefix |= (unsigned int)b << shift;\n"
    "      *need = want - above;\n"
    "    }\n"
    "  }\n"
    "  __syncthreads();\n"
    "}\n"
    "extern \"C\" __global__ void __launch_bounds__(NT) lathe_sample(int *out, const float *logits, i64 n,\n"
    "    i64 temperature_bits, i64 top_k, i64 top_p_bits, i64 u_bits) {\n"
    "  __shared__ u64 hist[256], red[32];\n"
    "  __shared__ float w_max[32];\n"
    "  __shared__ i64 w_arg[32], s_arg;\n"
    "  __shared__ unsigned int s_prefix;\n"
    "  __shared__ u64 s_need;\n"
    "  __shared__ unsigned int c_count, c_zb[NT];\n"
    "  __shared__ i64 c_idx[NT];\n"
    "  __shared__ u64 c_w[NT];\n"
    "  __shared__ unsigned int near[2048], s_bin;\n"
    "  const int tid = threadIdx.x, lane = tid & 31;\n"
    "  const float t = lt_bits_f(temperature_bits), top_p = lt_bits_f(top_p_bits), u = lt_bits_f(u_bits);\n"
    "  const float inf = __int_as_float(0x7f800000);\n"
    "  /* 1. the maximum and its first index (NaNs skipped) */\n"
    "  float mx = -inf;\n"
    "  i64 arg = n;\n"
    "  LT_SWEEP(if (i < n && v > mx) { mx = v; arg = i; })\n"
    "  for (int o = 16; o; o >>= 1) {\n"
    "    const float m2 = __shfl_xor_sync(FULL, mx, o);\n"
    "    const i64 a2 = __shfl_xor_sync(FULL, arg, o);\n"
    "    if (m2 > mx || (m2 == mx && a2 < arg)) { mx = m2; arg = a2; }\n"
    "  }\n"
    "  if (lane == 0) { w_max[tid >> 5] = mx; w_arg[tid >> 5] = arg; }\n"
    "  __syncthreads();\n"
    "  mx = w_max[0];\n"
    "  arg = w_arg[0];\n"
    "  for (int w = 1; w < 32; w++)\n"
    "    if (w_max[w] > mx || (w_max[w] == mx && w_arg[w] < arg)) { mx = w_max[w]; arg = w_arg[w]; }\n"
    "  if (!(t > 0.0f) || !(mx > -inf) || mx == inf) {\n"
    "    if (tid == 0) *out = (int)(arg < n ? arg : 0);\n"
    "    return;\n"
    "  }\n"
    "  /* 2. the top-k threshold: the key of the k-th largest logit. Fast path for k <= NT: a histogram of\n"
    "     the distance below the maximum in 1/64 steps (near the maximum the bins are sparse, so plain\n"
    "     atomics rarely collide) gives a cut holding at least k logits; when at most NT do, gather them\n"
    "     and take the k-th largest key among them exactly. Otherwise radix selection over all logits. */\n"
    "  unsigned int kth = 0u;\n"
    "  int gathered = 0; /* the candidates (key >= kth) are c_idx[0 .. c_count) */\n"
    "  if (top_k > 0 && top_k < n && top_k <= NT) {\n"
    "    for (int b = tid; b < 2048; b += NT) near[b] = 0u;\n"
    "    if (tid == 0) c_count = 0u;\n"
    "    __syncthreads();\n"
    "    LT_SWEEP(const float d = mx - v; if (i < n && d < 32.0f) atomicAdd(&near[(int)(d * 64.0f)], 1u);)\n"
    "    __syncthreads();\n"
    "    if (tid < 32) { /* the first bin where the count from the top reaches k, or 2048 */\n"
    "      unsigned int cs = 0u;\n"
    "      for (int b = 64 * tid; b < 64 * tid + 64; b++) cs += near[b];\n"
    "      unsigned int incl = cs;\n"
    "      for (int o = 1; o < 32; o <<= 1) {\n"
    "        const unsigned int y = __shfl_up_sync(FULL, incl, o);\n"
    "        if (tid >= o) incl += y;\n"
    "      }\n"
    "      const unsigned int reach = __ballot_sync(FULL, incl >= (unsigned int)top_k);\n"
    "      if (tid == (reach ? __ffs(reach) - 1 : 0)) {\n"
    "        unsigned int run = incl - cs;\n"
    "        int b = 64 * tid;\n"
    "        while (b < 64 * tid + 63 && run + near[b] < (unsigned int)top_k) run += near[b++];\n"
    "        s_bin = reach ? (unsigned int)b : 2048u;\n"
    "      }\n"
    "    }\n"
    "    __syncthreads();\n"
    "    const unsigned int cut = s_bin;\n"
    "    if (cut < 2048u) {\n"
    "      LT_SWEEP(const float d = mx - v; if (i < n && d < 32.0f && (unsigned int)(d * 64.0f) <= cut) {\n"
    "                 const unsigned int at = atomicAdd(&c_count, 1u); if (at < NT) c_idx[at] = i; })\n"
    "      __syncthreads();\n"
    "      const unsigned int cn = c_count;\n"
    "      if (cn <= NT) { /* the k-th largest key: the largest key with at least k candidates at or above it */\n"
    "        const unsigned int key = tid < (int)cn ? lt_key(logits[c_idx[tid]]) : 0u;\n"
    "        c_zb[tid] = key;\n"
    "        __syncthreads();\n"
    "        unsigned int ge = 0u;\n"
    "        if (tid < (int)cn)\n"
    "          for (unsigned int j = 0; j < cn; j++) ge += c_zb[j] >= key;\n"
    "        kth = lt_block_max(tid < (int)cn && ge >= (unsigned int)top_k ? key : 0u, red);\n"
    "        __syncthreads();\n"
    "        const int keep = tid < (int)cn && key >= kth; /* compact to the candidates */\n"
    "        if (tid == 0) c_count = 0u;\n"
    "        __syncthreads();\n"
    "        const i64 my = tid < (int)cn ? c_idx[tid] : 0;\n"
    "        __syncthreads();\n"
    "        if (keep) c_idx[atomicAdd(&c_count, 1u)] = my;\n"
    "        __syncthreads();\n"
    "        gathered = 1;\n"
    "      }\n"
    "    }\n"
    "  }\n"
    "  if (!gathered && top_k > 0 && top_k < n) {\n"
    "    if (tid == 0) { s_prefix = 0u; s_need = (u64)top_k; }\n"
    "    for (int shift = 24; shift >= 0; shift -= 8) {\n"
    "      __syncthreads();\n"
    "      const unsigned int high = shift == 24 ? 0u : ~0u << (shift + 8), prefix = s_prefix;\n"
    "      for (int b = tid; b < 256; b += NT) hist[b] = 0;\n"
    "      __syncthreads();\n"
    "      LT_SWEEP(const unsigned int k = lt_key(v); lt_hist_add(hist, i < n && (k & high) == prefix, (k >> shift) & 255u, 1ull);)\n"
    "      lt_select_digit(hist, &s_prefix, &s_need, shift);\n"
    "    }\n"
    "    kth = s_prefix;\n"
    "  }\n"
    "#define LT_Z(v) expf(((v) - mx) / t)\n"
    "#define LT_WEIGHT(v, z) (lt_key(v) >= kth && (z) > 0.0f ? (u64)((double)(z) * 1099511627776.0) : 0ull)\n"
    "  /* 2b. top-k leaves few candidates: gather them (one per thread) and finish in shared memory; the\n"
    "     top-p threshold is the largest candidate weight whose mass at or above it reaches top_p of the\n"
    "     total, and the draw walks the kept ones in vocabulary order */\n"
    "  if (top_k > 0 && top_k <= NT) {\n"
    "    if (!gathered) {\n"
    "      if (tid == 0) c_count = 0u;\n"
    "      __syncthreads();\n"
    "      LT_SWEEP(if (i < n && lt_key(v) >= kth) { const unsigned int at = atomicAdd(&c_count, 1u); if (at < NT) c_idx[at] = i; })\n"
    "      __syncthreads();\n"
    "    }\n"
    "    const unsigned int cn = c_count;\n"
    "    if (cn <= NT) { /* else ties at the k-th value overflow: the sweeps below */\n"
    "      const int have = tid < (int)cn;\n"
    "      const i64 ci = have ? c_idx[tid] : n;\n"
    "      const float cv = have ? logits[ci] : 0.0f, cz = have ? LT_Z(cv) : 0.0f;\n"
    "      const u64 cw = have ? LT_WEIGHT(cv, cz) : 0ull;\n"
    "      c_w[tid] = cw;\n"
    "      c_zb[tid] = __float_as_uint(cz);\n"
    "      u64 total = 0;\n"
    "      lt_block_scan(cw, red, &total); /* its barriers publish c_w and c_zb */\n"
    "      unsigned int zth = 0u;\n"
    "      if (top_p > 0.0f && top_p < 1.0f) {\n"
    "        u64 need = (u64)((double)top_p * (double)total), at_or_above = 0;\n"
    "        if (!need) need = 1;\n"
    "        if (cw)\n"
    "          for (unsigned int j = 0; j < cn; j++)\n"
    "            if (c_zb[j] >= c_zb[tid]) at_or_above += c_w[j];\n"
    "        zth = lt_block_max(cw && at_or_above >= need ? c_zb[tid] : 0u, red);\n"
    "      }\n"
    "      const u64 kw = cw && c_zb[tid] >= zth ? cw : 0ull;\n"
    "      __syncthreads();\n"
    "      c_w[tid] = kw;\n"
    "      u64 kept = 0;\n"
    "      lt_block_scan(kw, red, &kept);\n"
    "      u64 before = 0;\n"
    "      if (kw)\n"
    "        for (unsigned int j = 0; j < cn; j++)\n"
    "          if (c_idx[j] < ci) before += c_w[j];\n"
    "      const u64 r = (u64)((double)u * (double)kept);\n"
    "      if (tid == 0) s_arg = arg;\n"
    "      __syncthreads();\n"
    "      if (kw && before <= r && r < before + kw) s_arg = ci;\n"
    "      __syncthreads();\n"
    "      if (tid == 0) *out = (int)s_arg;\n"
    "      return;\n"
    "    }\n"
    "  }\n"
    "  /* 3. the top-p threshold on the weights' bits, against the candidates' total weight */\n"
    "  unsigned int zth = 0u;\n"
    "  if (top_p > 0.0f && top_p < 1.0f) {\n"
    "    u64 mine = 0, total = 0;\n"
    "    LT_SWEEP(const float z = LT_Z(v); if (i < n) mine += LT_WEIGHT(v, z);)\n"
    "    lt_block_scan(mine, red, &total);\n"
    "    const u64 need = (u64)((double)top_p * (double)total);\n"
    "    if (tid == 0) { s_prefix = 0u; s_need = need ? need : 1ull; }\n"
    "    for (int shift = 24; shift >= 0; shift -= 8) {\n"
    "      __syncthreads();\n"
    "      const unsigned int high = shift == 24 ? 0u : ~0u << (shift + 8), prefix = s_prefix;\n"
    "      for (int b = tid; b < 256; b += NT) hist[b] = 0;\n"
    "      __syncthreads();\n"
    "      LT_SWEEP(const float z = LT_Z(v); const unsigned int k = __float_as_uint(z);\n"
    "               const u64 w = i < n ? LT_WEIGHT(v, z) : 0ull;\n"
    "               lt_hist_add(hist, w && (k & high) == prefix, (k >> shift) & 255u, w);)\n"
    "      lt_select_digit(hist, &s_prefix, &s_need, shift);\n"
    "    }\n"
    "    zth = s_prefix;\n"
    "  }\n"
    "  /* 4. the kept weights of this thread's slice, a scan over the slices, the walk in the slice that\n"
    "     holds u * total */\n"
    "  const i64 per = (n + NT - 1) / NT, lo = tid * per < n ? tid * per : n, hi = lo + per < n ? lo + per : n;\n"
    "  u64 mine = 0, kept = 0;\n"
    "#pragma unroll 8\n"
    "  for (i64 i = lo; i < hi; i++) {\n"
    "    const float v = logits[i], z = LT_Z(v);\n"
    "    if (__float_as_uint(z) >= zth) mine += LT_WEIGHT(v, z);\n"
    "  }\n"
    "  const u64 before = lt_block_scan(mine, red, &kept) - mine;\n"
    "  const u64 r = (u64)((double)u * (double)kept);\n"
    "  if (tid == 0) s_arg = arg; /* only if rounding left r past every kept weight */\n"
    "  __syncthreads();\n"
    "  if (mine && before <= r && r < before + mine) {\n"
    "    u64 acc = before;\n"
    "    for (i64 i = lo; i < hi; i++) {\n"
    "      const float v = logits[i], z = LT_Z(v);\n"
    "      if (__float_as_uint(z) < zth) continue;\n"
    "      acc += LT_WEIGHT(v, z);\n"
    "      if (acc > r) { s_arg = i; break; }\n"
    "    }\n"
    "  }\n"
    "  __syncthreads();\n"
    "  if (tid == 0) *out = (int)s_arg;\n"
    "}\n";

struct DeviceSampler {
  Backend *b;
  BackendModule *m;
  int32_t *out; /* device: the token */
};

DeviceSampler *device_sampler_new(Backend *b, Diag *d) {
  DeviceSampler *s = xcalloc(1, sizeof *s, "the device sampler");
  s->b = b;
  if (!(s->m = b->ops->compile(b, sampler_source, d)) || !(s->out = b->ops->alloc(b, sizeof(int32_t), d))) {
    device_sampler_free(s);
    return NULL;
  }
  return s;
}

void device_sampler_free(DeviceSampler *s) {
  if (!s) return;
  if (s->out) s->b->ops->free(s->b, s->out);
  if (s->m) s->b->ops->module_free(s->b, s->m);
  free(s);
}

static int64_t float_bits(float f) {
  int32_t x;
  memcpy(&x, &f, sizeof x);
  return x;
}

int device_sampler_pick(DeviceSampler *s, const SamplerOptions *o, float u, const void *logits, int64_t vocab,
                        int32_t *token, Diag *d) {
  const BackendOps *ops = s->b->ops;
  if (vocab < 1 || vocab > INT32_MAX || !logits) {
    diag_error(d, 0, 0, "device sampler: no logits to sample (%lld)", (long long)vocab);
    return 0;
  }
  void *bufs[2] = {s->out, (void *)logits};
  int64_t syms[5] = {vocab, float_bits(sampler_is_greedy(o) ? 0.0f : (float)o->temperature), o->top_k,
                     float_bits((float)o->top_p), float_bits(u)};
  if (!ops->launch(s->b, s->m, "lathe_sample", bufs, 2, syms, 5, 1, 1024, d) ||
      !ops->download(s->b, token, s->out, sizeof *token, d))
    return 0;
  if (*token < 0 || *token >= vocab) {
    diag_error(d, 0, 0, "the device sampler returned token %d, outside the vocabulary [0, %lld)", *token,
               (long long)vocab);
    return 0;
  }
  return 1;
}

const char *device_sampler_source(void) { return sampler_source; }
