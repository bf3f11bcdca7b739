/* cuBLASLt through dlopen: one handle, one matmul descriptor (f32 compute, bf16 inputs, f32 output)
 * and, per problem shape, its matrix layouts and the heuristic's candidate algorithms, found once,
 * with the one chosen (the heuristic's first until the caller measures and chooses). */
#include "cublaslt.h"
#include "../base/mem.h"
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int LtStatus; /* cublasStatus_t: 0 = success */
typedef void *LtHandle, *LtDesc, *LtLayout, *LtPref;
typedef struct LtAlgo {
  uint64_t data[8];
} LtAlgo;
typedef struct LtHeuristic { /* cublasLtMatmulHeuristicResult_t */
  LtAlgo algo;
  size_t workspace_bytes;
  LtStatus state;
  float waves;
  int reserved[4];
} LtHeuristic;

/* values from cublasLt.h / library_types.h (CUDA 12 and 13) */
enum {
  LT_R_32F = 0,
  LT_R_16BF = 14,
  LT_COMPUTE_32F = 68,
  LT_DESC_TRANSA = 3,
  LT_DESC_TRANSB = 4,
  LT_OP_N = 0,
  LT_OP_T = 1,
  LT_PREF_MAX_WORKSPACE = 1
};

/* Shapes by (m, n, k) in an open-addressed table, emptied when full: a server's steps bring a new row count
 * almost every step, and a shape costs its layouts and a heuristic query to set up. */
#define LT_SHAPES 1024
/* Measured choices by (n, k, row-count bucket): a new row count in a bucket takes the algorithm measured
 * there when its own candidates include it, so each bucket is measured once, not each row count. */
#define LT_BUCKETS 256

typedef struct LtShape {
  int64_t m, n, k; /* m = 0: a free entry */
  LtLayout a, b, c;
  LtAlgo algo[CUBLASLT_CANDIDATES];
  int nalgo, chosen, measured;
} LtShape;

/* Choices measured earlier (cublaslt_remember: by another process, kept on disk), by exact shape. */
#define LT_KNOWN 4096
typedef struct LtKnown {
  int64_t m, n, k;
  LtAlgo algo;
} LtKnown;

typedef struct LtBucket {
  int64_t n, k;
  int bucket;
  LtAlgo algo;
} LtBucket;

struct CublasLt {
  void *dl;
  LtHandle h;
  LtDesc desc;
  void *ws;
  size_t ws_bytes;
  LtShape *shapes; /* LT_SHAPES */
  int nshapes;
  LtBucket buckets[LT_BUCKETS];
  int nbuckets;
  LtKnown *known; /* LT_KNOWN */
  int nknown;
  size_t (*version)(void); /* cublasLtGetVersion, when the library has it */
  LtStatus (*create)(LtHandle *);
  LtStatus (*destroy)(LtHandle);
  LtStatus (*desc_create)(LtDesc *, int compute, int scale);
  LtStatus (*desc_destroy)(LtDesc);
  LtStatus (*desc_set)(LtDesc, int attr, const void *buf, size_t bytes);
  LtStatus (*layout_create)(LtLayout *, int type, uint64_t rows, uint64_t cols, int64_t ld);
  LtStatus (*layout_destroy)(LtLayout);
  LtStatus (*pref_create)(LtPref *);
  LtStatus (*pref_destroy)(LtPref);
  LtStatus (*pref_set)(LtPref, int attr, const void *buf, size_t bytes);
  LtStatus (*heuristic)(LtHandle, LtDesc, LtLayout, LtLayout, LtLayout, LtLayout, LtPref, int, LtHeuristic *, int *);
  LtStatus (*matmul)(LtHandle, LtDesc, const void *alpha, const void *a, LtLayout, const void *b, LtLayout,
                     const void *beta, const void *c, LtLayout, void *d, LtLayout, const LtAlgo *, void *ws,
                     size_t ws_bytes, void *stream);
};

static int lt_fail(Diag *d, const char *call, LtStatus st) {
  diag_error(d, 0, 0, "cuBLASLt: %s failed (status %d)", call, st);
  return 0;
}

CublasLt *cublaslt_open(void *workspace, size_t bytes, Diag *d) {
  static const char *names[] = {"libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so"};
  void *dl = NULL;
  for (size_t i = 0; i < sizeof names / sizeof *names && !dl; i++) dl = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
  if (!dl) {
    diag_error(d, 0, 0, "cuBLASLt: libcublasLt.so not found (%s)", dlerror());
    return NULL;
  }
  CublasLt *lt = mem_calloc(d, 1, sizeof *lt, "cuBLASLt");
  if (lt && (!(lt->shapes = mem_calloc(d, LT_SHAPES, sizeof *lt->shapes, "cuBLASLt's shapes")) ||
             !(lt->known = mem_calloc(d, LT_KNOWN, sizeof *lt->known, "cuBLASLt's known choices")))) {
    free(lt->shapes);
    free(lt);
    lt = NULL;
  }
  if (!lt) {
    dlclose(dl);
    return NULL;
  }
  lt->dl = dl;
  lt->ws = workspace;
  lt->ws_bytes = bytes;
  struct {
    void **slot;
    const char *name;
  } fns[] = {
      {(void **)&lt->create, "cublasLtCreate"},
      {(void **)&lt->destroy, "cublasLtDestroy"},
      {(void **)&lt->desc_create, "cublasLtMatmulDescCreate"},
      {(void **)&lt->desc_destroy, "cublasLtMatmulDescDestroy"},
      {(void **)&lt->desc_set, "cublasLtMatmulDescSetAttribute"},
      {(void **)&lt->layout_create, "cublasLtMatrixLayoutCreate"},
      {(void **)&lt->layout_destroy, "cublasLtMatrixLayoutDestroy"},
      {(void **)&lt->pref_create, "cublasLtMatmulPreferenceCreate"},
      {(void **)&lt->pref_destroy, "cublasLtMatmulPreferenceDestroy"},
      {(void **)&lt->pref_set, "cublasLtMatmulPreferenceSetAttribute"},
      {(void **)&lt->heuristic, "cublasLtMatmulAlgoGetHeuristic"},
      {(void **)&lt->matmul, "cublasLtMatmul"},
  };
  for (size_t i = 0; i < sizeof fns / sizeof *fns; i++)
    if (!(*fns[i].slot = dlsym(dl, fns[i].name))) {
      diag_error(d, 0, 0, "cuBLASLt: %s missing from the library", fns[i].name);
      cublaslt_close(lt);
      return NULL;
    }
  *(void **)&lt->version = dlsym(dl, "cublasLtGetVersion");
  LtStatus st;
  if ((st = lt->create(&lt->h))) {
    lt->h = NULL;
    lt_fail(d, "cublasLtCreate", st);
    cublaslt_close(lt);
    return NULL;
  }
  /* row-major C[m][n] = A[m][k] W[n][k]^T is, column-major, C^T (n x m) = W^T' (op T of a k x n) x A^T (k x m) */
  int ta = LT_OP_T, tb = LT_OP_N;
  if ((st = lt->desc_create(&lt->desc, LT_COMPUTE_32F, LT_R_32F)) ||
      (st = lt->desc_set(lt->desc, LT_DESC_TRANSA, &ta, sizeof ta)) ||
      (st = lt->desc_set(lt->desc, LT_DESC_TRANSB, &tb, sizeof tb))) {
    lt_fail(d, "cublasLtMatmulDesc", st);
    cublaslt_close(lt);
    return NULL;
  }
  return lt;
}

static int row_bucket(int64_t m) {
  int b = 0;
  while (b < 62 && (1ll << b) < m) b++;
  return b; /* m in (2^(b-1), 2^b] */
}

static LtBucket *bucket_of(CublasLt *lt, int64_t m, int64_t n, int64_t k) {
  int b = row_bucket(m);
  for (int i = 0; i < lt->nbuckets; i++)
    if (lt->buckets[i].n == n && lt->buckets[i].k == k && lt->buckets[i].bucket == b) return &lt->buckets[i];
  return NULL;
}

/* Takes `a` as the shape's choice when it is among the shape's own candidates. */
static int adopt(LtShape *s, const LtAlgo *a) {
  for (int i = 0; i < s->nalgo; i++)
    if (!memcmp(&s->algo[i], a, sizeof *a)) {
      s->chosen = i;
      s->measured = 1;
      return 1;
    }
  return 0;
}

/* A new shape: the choice known for it exactly (the latest), else its bucket's. */
static void adopt_known(CublasLt *lt, LtShape *s) {
  for (int i = lt->nknown - 1; i >= 0; i--)
    if (lt->known[i].m == s->m && lt->known[i].n == s->n && lt->known[i].k == s->k && adopt(s, &lt->known[i].algo))
      return;
  const LtBucket *b = bucket_of(lt, s->m, s->n, s->k);
  if (b) adopt(s, &b->algo);
}

static void set_bucket(CublasLt *lt, int64_t m, int64_t n, int64_t k, const LtAlgo *a) {
  LtBucket *b = bucket_of(lt, m, n, k);
  if (!b && lt->nbuckets < LT_BUCKETS) {
    b = &lt->buckets[lt->nbuckets++];
    *b = (LtBucket){n, k, row_bucket(m), {{0}}};
  }
  if (b) b->algo = *a;
}

static void shapes_clear(CublasLt *lt) {
  for (int i = 0; i < LT_SHAPES; i++) {
    LtShape *o = &lt->shapes[i];
    if (!o->m) continue;
    lt->layout_destroy(o->a), lt->layout_destroy(o->b), lt->layout_destroy(o->c);
    memset(o, 0, sizeof *o);
  }
  lt->nshapes = 0;
}

static LtShape *shape_for(CublasLt *lt, int64_t m, int64_t n, int64_t k, Diag *d) {
  if (m < 1 || n < 1 || k < 1) {
    diag_error(d, 0, 0, "cuBLASLt: a %lld x %lld x %lld GEMM", (long long)m, (long long)n, (long long)k);
    return NULL;
  }
  uint64_t at = ((uint64_t)m * 0x9E3779B97F4A7C15ull) ^ ((uint64_t)n * 0xC2B2AE3D27D4EB4Full) ^ (uint64_t)k;
  for (int probe = 0; probe < LT_SHAPES; probe++) {
    LtShape *e = &lt->shapes[(at + (uint64_t)probe) % LT_SHAPES];
    if (!e->m) break;
    if (e->m == m && e->n == n && e->k == k) return e;
  }
  if (lt->nshapes >= LT_SHAPES * 3 / 4) shapes_clear(lt); /* keep probes short */
  LtShape *s = NULL;
  for (int probe = 0; !s; probe++)
    if (!lt->shapes[(at + (uint64_t)probe) % LT_SHAPES].m) s = &lt->shapes[(at + (uint64_t)probe) % LT_SHAPES];
  memset(s, 0, sizeof *s);
  s->m = m, s->n = n, s->k = k;
  LtStatus st;
  if ((st = lt->layout_create(&s->a, LT_R_16BF, (uint64_t)k, (uint64_t)n, k)) ||
      (st = lt->layout_create(&s->b, LT_R_16BF, (uint64_t)k, (uint64_t)m, k)) ||
      (st = lt->layout_create(&s->c, LT_R_32F, (uint64_t)n, (uint64_t)m, n))) {
    if (s->a) lt->layout_destroy(s->a);
    if (s->b) lt->layout_destroy(s->b);
    memset(s, 0, sizeof *s);
    lt_fail(d, "cublasLtMatrixLayoutCreate", st);
    return NULL;
  }
  LtPref pref = NULL;
  LtHeuristic h[CUBLASLT_CANDIDATES];
  int found = 0;
  uint64_t ws = lt->ws_bytes;
  if ((st = lt->pref_create(&pref)) || (st = lt->pref_set(pref, LT_PREF_MAX_WORKSPACE, &ws, sizeof ws)) ||
      (st = lt->heuristic(lt->h, lt->desc, s->a, s->b, s->c, s->c, pref, CUBLASLT_CANDIDATES, h, &found)) ||
      found < 1) {
    if (pref) lt->pref_destroy(pref);
    lt->layout_destroy(s->a), lt->layout_destroy(s->b), lt->layout_destroy(s->c);
    memset(s, 0, sizeof *s);
    if (!st)
      diag_error(d, 0, 0, "cuBLASLt: no algorithm for a %lld x %lld x %lld bf16 GEMM", (long long)m, (long long)n,
                 (long long)k);
    else lt_fail(d, "cublasLtMatmulAlgoGetHeuristic", st);
    return NULL;
  }
  lt->pref_destroy(pref);
  for (int i = 0; i < found && i < CUBLASLT_CANDIDATES; i++)
    if (h[i].state == 0) s->algo[s->nalgo++] = h[i].algo;
  if (!s->nalgo) {
    lt->layout_destroy(s->a), lt->layout_destroy(s->b), lt->layout_destroy(s->c);
    memset(s, 0, sizeof *s);
    diag_error(d, 0, 0, "cuBLASLt: no usable algorithm for a %lld x %lld x %lld bf16 GEMM", (long long)m, (long long)n,
               (long long)k);
    return NULL;
  }
  lt->nshapes++;
  adopt_known(lt, s);
  return s;
}

int cublaslt_candidates(CublasLt *lt, int64_t m, int64_t n, int64_t k, int *chosen, Diag *d) {
  LtShape *s = shape_for(lt, m, n, k, d);
  if (!s) return 0;
  *chosen = s->measured ? s->chosen : -1;
  return s->nalgo;
}

void cublaslt_choose(CublasLt *lt, int64_t m, int64_t n, int64_t k, int which) {
  Diag d = {0};
  LtShape *s = shape_for(lt, m, n, k, &d);
  if (!s || which < 0 || which >= s->nalgo) return;
  s->chosen = which, s->measured = 1;
  set_bucket(lt, m, n, k, &s->algo[which]);
}

void cublaslt_remember(CublasLt *lt, int64_t m, int64_t n, int64_t k, const uint64_t algo[8]) {
  LtAlgo a;
  memcpy(a.data, algo, sizeof a.data);
  if (lt->nknown < LT_KNOWN) lt->known[lt->nknown++] = (LtKnown){m, n, k, a};
  set_bucket(lt, m, n, k, &a);
}

int cublaslt_chosen_algo(CublasLt *lt, int64_t m, int64_t n, int64_t k, uint64_t algo[8]) {
  Diag d = {0};
  LtShape *s = shape_for(lt, m, n, k, &d);
  if (!s || !s->measured) return 0;
  memcpy(algo, s->algo[s->chosen].data, sizeof s->algo[s->chosen].data);
  return 1;
}

size_t cublaslt_version(const CublasLt *lt) { return lt->version ? lt->version() : 0; }

int cublaslt_gemm(CublasLt *lt, int64_t m, int64_t n, int64_t k, const void *a, const void *w, const void *add, void *c,
                  int which, void *stream, Diag *d) {
  LtShape *s = shape_for(lt, m, n, k, d);
  if (!s) return 0;
  if (which < 0 || which >= s->nalgo) which = s->chosen;
  const float one = 1.0f, beta = add ? 1.0f : 0.0f;
  LtStatus st = lt->matmul(lt->h, lt->desc, &one, w, s->a, a, s->b, &beta, add ? add : c, s->c, c, s->c,
                           &s->algo[which], lt->ws, lt->ws_bytes, stream);
  if (st) {
    diag_error(d, 0, 0, "cuBLASLt: a %lld x %lld x %lld bf16 GEMM failed (status %d)", (long long)m, (long long)n,
               (long long)k, st);
    return 0;
  }
  return 1;
}

void cublaslt_close(CublasLt *lt) {
  if (!lt) return;
  if (lt->shapes) shapes_clear(lt);
  free(lt->shapes);
  free(lt->known);
  if (lt->desc) lt->desc_destroy(lt->desc);
  if (lt->h) lt->destroy(lt->h);
  dlclose(lt->dl);
  free(lt);
}
