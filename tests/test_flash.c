/* Flash attention (kernel/lower_flash.c, code/render_flash.c): which programs' attention becomes one
 * CUDA kernel, what that kernel holds, the variants that launch nothing in place of the scores and
 * softmax kernels, the precision knob, and that the CUDA C compiles under NVRTC. Running it against
 * the float64 reference is the differential suite's job on the GPU (make test-gpu). */
#include <stdio.h>
#include <stdlib.h>
#include "testutil.h"
#include "backend/nvrtc.h"
#include "driver/pipeline.h"

#define CAUSAL_GQA "q: f32[1,4,seq,16]; k: f32[1,2,seq,16]; v: f32[1,2,seq,16]\nreturn attention(q, k, v, true)"

static Compilation *compiled(const char *src, Target t, MatmulPrecision mm) {
  Diag d = {0};
  Compilation *c = compilation_new(t, NULL);
  c->matmul = mm;
  if (!compile_source(c, src, ST_CODE, &d)) fail_msg("compile failed: %s\n%s", d.msg, src);
  return c;
}

static char *printed(const Compilation *c, Stage s) {
  StrBuf b = {0};
  print_stage(&b, c, s);
  char *r = strdup(sb_str(&b));
  sb_free(&b);
  return r;
}

/* The flash statement of kernel i's variant, or NULL. */
static const KFlash *flash_of(const Compilation *c, int i) {
  const KKernel *alt = c->kernel->kernels[i].alt;
  if (!alt || !alt->body || alt->body->nbody != 1 || alt->body->body[0]->kind != KS_FLASH) return NULL;
  return alt->body->body[0]->flash;
}

/* The program's CUDA C compiles under NVRTC for sm_90 (where NVRTC is installed). */
static void nvrtc_compiles(const Compilation *c) {
  if (!nvrtc_available()) return;
  Diag d = {0};
  void *cubin = NULL;
  size_t size = 0;
  if (!nvrtc_compile(sb_str((StrBuf *)&c->code), "sm_90", &cubin, &size, &d)) fail_msg("%s", d.msg);
  assert_true(size > 0);
  free(cubin);
}

static void causal_gqa_is_one_kernel(void **state) {
  (void)state;
  Compilation *c = compiled(CAUSAL_GQA, TARGET_CUDA, MM_HIGH);
  assert_int_equal(c->kernel->nkernels, 3);
  const KFlash *f = flash_of(c, 2);
  assert_non_null(f);
  const KKernel *fk = c->kernel->kernels[2].alt;
  assert_string_equal(fk->name, "attention_2_flash");
  assert_true(fk->tensor_cores);
  assert_int_equal(fk->block, 128);
  assert_int_equal(f->parts, 2);
  assert_int_equal(f->d_extent, 16);
  assert_int_equal(f->groups, 4);
  assert_int_equal(f->width, 16);
  assert_int_equal(f->scores_kernel, 0);
  assert_int_equal(f->softmax_kernel, 1);
  assert_non_null(f->t_last); /* causal: blocks stop at their last row's key */
  /* it reads q, k and v, not the scores or probabilities */
  assert_int_equal(fk->nparams, 4);
  for (int i = 1; i < 4; i++) assert_int_equal(c->loop->bufs[fk->params[i].buf].kind, BUF_INPUT);
  /* one block per 64 rows of a head */
  SymEnv env = {0};
  symenv_set(&env, "seq", 130);
  int64_t grid = 0;
  assert_true(ex_eval_int(fk->grid, &env, &grid));
  assert_int_equal(grid, 3 * 4);
  /* the scores and softmax kernels launch nothing: the flash kernel computes them in a prefill, the
   * P x V kernel itself (flash-decoding) otherwise */
  for (int i = 0; i < 2; i++) {
    const KKernel *k = &c->kernel->kernels[i];
    assert_true(k->skip);
    assert_string_equal(k->by, "attention_2");
    assert_null(k->alt);
  }
  char *kern = printed(c, ST_KERNEL), *tile = printed(c, ST_TILE);
  assert_contains(kern, "kernel attention_0: nothing: attention_2 computes it");
  assert_contains(kern, "kernel attention_1: nothing: attention_2 computes it");
  assert_contains(
      kern,
      "flash attention, bf16 tensor cores (x2): rows i2 < seq, groups i1 < 4, values i3 < 16, keys r0 < seq (up to r0 = i2)");
  assert_contains(kern, "s = sum over d5 < 16 of q[0, i1, i2, d5] * k[0, i1 // 2, r0, d5]");
  assert_contains(kern, "score = i2 < r0 ? -inf : s*0.25");
  assert_contains(kern, "out0[0, i1, i2, i3] = o");
  assert_contains(tile, "flash-attention=bf16x2");
  const char *code = sb_str(&c->code);
  assert_contains(code, "attention_2_flash(");
  assert_contains(code, "lt_ldsm_x4_trans(");
  assert_contains(code, "lt_flash<"); /* the flash template, instantiated */
  assert_null(strstr(code, "_skip")); /* nothing to compile for the skipping variants */
  nvrtc_compiles(c);
  free(kern);
  free(tile);
  compilation_free(c);
}

static void precision_picks_parts(void **state) {
  (void)state;
  Compilation *c = compiled(CAUSAL_GQA, TARGET_CUDA, MM_MEDIUM);
  assert_non_null(flash_of(c, 2));
  assert_int_equal(flash_of(c, 2)->parts, 1);
  char *tile = printed(c, ST_TILE);
  assert_contains(tile, "flash-attention=bf16x1");
  free(tile);
  compilation_free(c);
  /* highest: f32 on CUDA cores, the three kernels' blocked variants */
  c = compiled(CAUSAL_GQA, TARGET_CUDA, MM_HIGHEST);
  assert_null(flash_of(c, 2));
  assert_string_equal(c->kernel->kernels[2].alt->name, "attention_2_rows8");
  assert_false(c->kernel->kernels[0].alt->skip);
  compilation_free(c);
  /* the CPU has no such kernel */
  c = compiled(CAUSAL_GQA, TARGET_CPU, MM_HIGH);
  for (int i = 0; i < c->kernel->nkernels; i++) assert_null(flash_of(c, i));
  compilation_free(c);
}

static void unmasked_and_flattened_heads(void **state) {
  (void)state;
  Compilation *c =
      compiled("q: f32[1,4,seq,32]; k: f32[1,1,seq,32]; v: f32[1,1,seq,32]\nreturn attention(q, k, v, false)",
               TARGET_CUDA, MM_HIGH);
  const KFlash *f = flash_of(c, 2);
  assert_non_null(f);
  assert_null(f->t_last); /* no mask: every block walks every key */
  assert_int_equal(f->width, 32);
  compilation_free(c);
  /* [seq, heads * 64]: the column axis splits into a head (group) and its element (value) */
  c = compiled("q: f32[1,4,seq,64]; k: f32[1,2,seq,64]; v: f32[1,2,seq,64]\n"
               "return reshape(permute(attention(q, k, v, true), [0, 2, 1, 3]), [1, seq, 256])",
               TARGET_CUDA, MM_HIGH);
  int last = c->kernel->nkernels - 1;
  f = flash_of(c, last);
  assert_non_null(f);
  assert_int_equal(f->ngroup, 1);
  assert_int_equal(f->nvalue, 1);
  assert_int_equal(f->groups, 4);
  assert_int_equal(f->width, 64);
  char *kern = printed(c, ST_KERNEL);
  assert_contains(kern, "out0[0, i1, g5*64 + c6] = o");
  assert_contains(kern, "k[0, g5 // 2, r0, d4]");
  free(kern);
  compilation_free(c);
}

/* Attention written out by hand is the same pattern; once the probabilities are also an output, or
 * the head dimension is beyond the kernel's registers, the three kernels stay. */
static void written_out_attention_and_refusals(void **state) {
  (void)state;
  const char *by_hand = "q: f32[1,4,seq,32]; k: f32[1,4,seq,32]; v: f32[1,4,seq,32]\n"
                        "p = softmax(matmul(q, permute(k, [0, 1, 3, 2])) * 0.2, -1)\n"
                        "return matmul(p, v)";
  Compilation *c = compiled(by_hand, TARGET_CUDA, MM_HIGH);
  assert_non_null(flash_of(c, 2));
  compilation_free(c);
  char src[512];
  snprintf(src, sizeof src, "%s, p", by_hand);
  c = compiled(src, TARGET_CUDA, MM_HIGH);
  for (int i = 0; i < c->kernel->nkernels; i++) {
    assert_null(flash_of(c, i));
    if (c->kernel->kernels[i].alt) assert_false(c->kernel->kernels[i].alt->skip);
  }
  compilation_free(c);
  /* the product's epilogue reads the probabilities too: they must exist */
  c = compiled("q: f32[1,4,seq,32]; k: f32[1,4,seq,32]; v: f32[1,4,seq,32]\n"
               "p = softmax(matmul(q, permute(k, [0, 1, 3, 2])) * 0.2, -1)\n"
               "return matmul(p, v) + slice(p, 3, 0, 32)",
               TARGET_CUDA, MM_HIGH);
  for (int i = 0; i < c->kernel->nkernels; i++) assert_null(flash_of(c, i));
  compilation_free(c);
  c = compiled("q: f32[1,2,seq,256]; k: f32[1,2,seq,256]; v: f32[1,2,seq,256]\nreturn attention(q, k, v, true)",
               TARGET_CUDA, MM_HIGH);
  for (int i = 0; i < c->kernel->nkernels; i++) assert_null(flash_of(c, i));
  compilation_free(c);
}

/* The flash-decoding statement of kernel i itself, or NULL. */
static const KFlash *decode_of(const Compilation *c, int i) {
  const KKernel *k = &c->kernel->kernels[i];
  if (!k->body || k->body->nbody != 1 || k->body->body[0]->kind != KS_FLASH) return NULL;
  const KFlash *f = k->body->body[0]->flash;
  return f && f->decode ? f : NULL;
}

static int64_t eval_at(const Expr *e, const char *sym, int64_t value) {
  SymEnv env = {0};
  symenv_set(&env, sym, value);
  int64_t out = -1;
  assert_true(ex_eval_int(e, &env, &out));
  return out;
}

/* Decode-shaped attention (one query row, many keys): the P x V kernel itself is flash-decoding,
 * with the query heads that read one k / v head in one block and the keys in chunks; the scores
 * and softmax kernels launch nothing. */
static void decode_is_one_kernel_per_kv_head(void **state) {
  (void)state;
  Compilation *c = compiled("q: f32[1,8,1,64]; k: f32[1,2,n,64]; v: f32[1,2,n,64]\nreturn attention(q, k, v, true)",
                            TARGET_CUDA, MM_HIGH);
  assert_int_equal(c->kernel->nkernels, 3);
  const KFlash *f = decode_of(c, 2);
  assert_non_null(f);
  assert_int_equal(f->parts, 0);
  assert_int_equal(f->m_var, -1); /* one query row */
  assert_int_equal(f->rows, 4);   /* heads h = 4j .. 4j + 3 read k and v head j */
  assert_true(f->share >= 0);
  assert_int_equal(f->groups, 8);
  assert_int_equal(f->width, 64);
  const KKernel *k = &c->kernel->kernels[2];
  assert_false(k->tensor_cores);
  assert_int_equal(k->block, 128);
  /* 2 blocks of heads x chunks of at least 32 keys, at most 264 blocks */
  assert_int_equal(eval_at(k->grid, "n", 1), 2);
  assert_int_equal(eval_at(k->grid, "n", 100), 2 * 4);
  assert_int_equal(eval_at(k->grid, "n", 1000), 2 * 32);
  assert_int_equal(eval_at(k->grid, "n", 100000), 2 * 64); /* at most 64 chunks a row */
  /* the scratch: row counters, then (max, sum, 64 outputs) for 4 heads per block */
  assert_int_equal(eval_at(k->scratch, "n", 1000), MMA_COUNTERS + 2 * 32 * 4 * 66 * 4);
  for (int i = 0; i < 2; i++) {
    assert_true(c->kernel->kernels[i].skip);
    assert_null(c->kernel->kernels[i].alt);
  }
  char *kern = printed(c, ST_KERNEL), *tile = printed(c, ST_TILE);
  assert_contains(kern, "flash-decoding, f32: one row, 4 heads sharing k and v in a block (i1), key chunks");
  assert_contains(kern, "k[0, i1 // 4, r0, d5]");
  assert_contains(tile, "flash-decoding");
  const char *code = sb_str(&c->code);
  /* head and value width 64, 4 heads a block, 2 blocks a row; a contiguous cache keeps the element-at-a-time form
   * (the vector form is for paged caches: over a contiguous one it made the one-sequence path slower) */
  assert_false(f->vec);
  assert_int_equal(k->min_blocks, 0);
  assert_contains(code, "lt_flash_decode<64, 64, 4, 2LL, 1024, false>(");
  assert_contains(code, "__launch_bounds__(128) attention_2(");
  assert_contains(code, "lt_scratch[counter], 1u)"); /* the chunks meet at a counter (preamble) */
  assert_null(strstr(code, "attention_0("));         /* nothing compiled for the kernels that launch nothing */
  nvrtc_compiles(c);
  free(kern);
  free(tile);
  compilation_free(c);
  /* LATHE_DECODE_VEC=0: the element-at-a-time form, with the chunks as before */
  setenv("LATHE_DECODE_VEC", "0", 1);
  c = compiled("q: f32[1,8,1,64]; k: f32[1,2,n,64]; v: f32[1,2,n,64]\nreturn attention(q, k, v, true)", TARGET_CUDA,
               MM_HIGH);
  unsetenv("LATHE_DECODE_VEC");
  f = decode_of(c, 2);
  assert_non_null(f);
  assert_false(f->vec);
  assert_null(f->k_row); /* direct addressing: no row split */
  assert_int_equal(c->kernel->kernels[2].min_blocks, 0);
  assert_int_equal(eval_at(c->kernel->kernels[2].grid, "n", 4097), 2 * 64);
  code = sb_str(&c->code);
  assert_contains(code, "lt_flash_decode<64, 64, 4, 2LL, 1024, false>(");
  assert_contains(code, "__launch_bounds__(128) attention_2(");
  nvrtc_compiles(c);
  compilation_free(c);
}

/* The vector form over a paged bf16 cache (a block table per row): the rows through the table, 8 bf16 a load; and
 * the chunks: as many as the tiles per chunk need (4,097 keys: 129 tiles, 3 a chunk, 43 chunks, not 64 of which 21
 * would hold no key), at most the blocks that run at once in all (KKernel.min_blocks a multiprocessor), and with
 * LATHE_DECODE_TILES fewer, longer chunks. A head dimension of 48 (no power of two) keeps the element-at-a-time
 * rows. */
static void decode_vector_rows(void **state) {
  (void)state;
  const char *paged = "c: bf16[64, 16, 2, 64]; x: f32[tok, 2, 64]; s: i32[tok]; t: i32[2, 4]; r: i32[tok]; "
                      "q: f32[tok, 8, 1, 64]; n: i32[tok]\n"
                      "p = cache_scatter(c, x, s)\nk = permute(paged_gather(p, t, r, len=ctx), [0, 2, 1, 3])\n"
                      "return attention(q, k, k, kv_len=n)";
  Compilation *c = compiled(paged, TARGET_CUDA, MM_HIGH);
  int last = c->kernel->nkernels - 1;
  const KFlash *f = decode_of(c, last);
  assert_non_null(f);
  assert_true(f->vec);
  assert_non_null(f->k_row);
  assert_true(f->k_row->flags & EXF_LOAD); /* the block table */
  const KKernel *k = &c->kernel->kernels[last];
  /* 4 heads x 8 columns of outputs and two tiles of one-word k and v vectors (2 + 2): 96 registers, 5 blocks */
  assert_int_equal(k->min_blocks, 5);
  SymEnv env = {0};
  symenv_set(&env, "tok", 1);
  symenv_set(&env, "ctx", 4097);
  int64_t grid = 0;
  assert_true(ex_eval_int(k->grid, &env, &grid));
  assert_int_equal(grid, 2 * 43); /* two blocks of heads */
  symenv_set(&env, "tok", 64);
  symenv_set(&env, "ctx", 256);
  assert_true(ex_eval_int(k->grid, &env, &grid));
  /* 660 / 128 = 5 chunks, so 2 tiles each: 4 (LATHE_DECODE_FILL's 8 a multiprocessor would give 8) */
  assert_int_equal(grid, 64 * 2 * 4);
  const char *code = sb_str(&c->code);
  assert_contains(code, ", true, 1, 1>(lt_M, lt_T, lt_scratch, lt_fq, lt_ftlast, lt_fscore, lt_fstore, lt_fkr, lt_fkc, "
                        "lt_fkp, lt_fvr, lt_fvc, lt_fvp);");
  nvrtc_compiles(c);
  compilation_free(c);
  /* LATHE_DECODE_TILES=4: chunks of at least 4 tiles (129 / 4 = 32 chunks at most, 5 tiles each: 26) */
  setenv("LATHE_DECODE_TILES", "4", 1);
  c = compiled(paged, TARGET_CUDA, MM_HIGH);
  unsetenv("LATHE_DECODE_TILES");
  symenv_set(&env, "tok", 1);
  symenv_set(&env, "ctx", 4097);
  assert_true(ex_eval_int(c->kernel->kernels[c->kernel->nkernels - 1].grid, &env, &grid));
  assert_int_equal(grid, 2 * 26);
  compilation_free(c);
  c = compiled("c: bf16[64, 16, 2, 48]; x: f32[tok, 2, 48]; s: i32[tok]; t: i32[2, 4]; r: i32[tok]; "
               "q: f32[tok, 8, 1, 48]; n: i32[tok]\n"
               "p = cache_scatter(c, x, s)\nk = permute(paged_gather(p, t, r, len=ctx), [0, 2, 1, 3])\n"
               "return attention(q, k, k, kv_len=n)",
               TARGET_CUDA, MM_HIGH);
  last = c->kernel->nkernels - 1;
  f = decode_of(c, last);
  assert_non_null(f);
  assert_false(f->vec);
  assert_non_null(f->k_row);
  assert_contains(sb_str(&c->code), "lt_flash_decode_rows<48, 48, 4, 2LL, ");
  nvrtc_compiles(c);
  compilation_free(c);
}

/* The CPU's attention kernel (code/render_flash_cpu.c): its vector form takes the heads that read the same k and v
 * in one work item and computes each key's row once (a paged cache's block table read once a key, not once an
 * element), for any number of rows over a paged cache and up to 8 over a contiguous one (the scalar form beyond);
 * widths that are no multiple of 16 and LATHE_DECODE_VEC=0 keep the scalar form. */
/* The CPU attention kernel of src: its form (vec), heads an item (rows) and vector rows bound (vec_rows), and
 * that its C contains each of has[] (NULL-terminated). */
static void check_cpu_form(const char *src, int vec, int rows, int vec_rows, const char *const *has) {
  Compilation *c = compiled(src, TARGET_CPU, MM_HIGH);
  const KFlash *f = decode_of(c, c->kernel->nkernels - 1);
  assert_non_null(f);
  assert_int_equal(f->vec, vec);
  assert_int_equal(f->rows, rows);
  if (vec) assert_int_equal(f->vec_rows, vec_rows);
  else assert_null(f->k_row);
  if (vec && !vec_rows) assert_true(f->k_row && (f->k_row->flags & EXF_LOAD)); /* the block table */
  for (int i = 0; has[i]; i++) assert_contains(sb_str(&c->code), has[i]);
  if (vec && !vec_rows) assert_null(strstr(sb_str(&c->code), "lt_rows <="));
  compilation_free(c);
}

static void cpu_vector_form(void **state) {
  (void)state;
  const char *paged = "c: f32[64, 16, 2, 64]; c2: f32[64, 16, 2, 64]; t: i32[2, 4]; r: i32[tok]; "
                      "q: f32[tok, 8, 1, 64]; n: i32[tok]\n"
                      "k = permute(paged_gather(c, t, r, len=ctx), [0, 2, 1, 3])\n"
                      "v = permute(paged_gather(c2, t, r, len=ctx), [0, 2, 1, 3])\n"
                      "return attention(q, k, v, kv_len=n)";
  /* 8 query heads over 2 k / v heads: 4 an item, f32 rows read in place */
  check_cpu_form(paged, 1, 4, 0,
                 (const char *[]){"lt_vf lt_q[4][64 / LT_VW], lt_o[4][64 / LT_VW];",
                                  "for (int64_t lt_w = 0; lt_w < lt_M * 2LL; lt_w++) {", "lt_kp = c + lt_kr + lt_c0;",
                                  NULL});
  /* a bf16 cache: each key's row converted once into a float row */
  check_cpu_form("c: bf16[64, 16, 2, 32]; c2: bf16[64, 16, 2, 32]; t: i32[2, 4]; r: i32[tok]; "
                 "q: f32[tok, 4, 1, 32]; n: i32[tok]\n"
                 "k = permute(paged_gather(c, t, r, len=ctx), [0, 2, 1, 3])\n"
                 "v = permute(paged_gather(c2, t, r, len=ctx), [0, 2, 1, 3])\n"
                 "return attention(q, k, v, kv_len=n)",
                 1, 2, 0, (const char *[]){"lt_kp = lt_kb;", NULL});
  /* a contiguous cache: the vector form up to 8 query rows, the block form (16 rows an item, each tile's k
   * transposed) past 64, the scalar form between, in one function */
  check_cpu_form("q: f32[1,8,seq,64]; k: f32[1,2,seq,64]; v: f32[1,2,seq,64]\nreturn attention(q, k, v, true)", 1, 4, 8,
                 (const char *[]){"if (lt_rows <= 8)", "lt_vf lt_q[4][64 / LT_VW], lt_o[4][64 / LT_VW];",
                                  "else if (lt_rows > 64)", "float lt_q[64][64], lt_p[64][64]",
                                  "lt_kt[lt_d][lt_j] = lt_kp[lt_d];", "float lt_q[64], lt_o[64]", NULL});
  /* 8 heads reading one k and v: the block form's items take 8 rows, so 64 (row, head) pairs as with 4 heads */
  check_cpu_form("q: f32[1,8,seq,64]; k: f32[1,1,seq,64]; v: f32[1,1,seq,64]\nreturn attention(q, k, v, true)", 1, 8, 8,
                 (const char *[]){"float lt_q[64][64], lt_p[64][64]", "int64_t lt_qend[8], lt_end = 0;", NULL});
  /* head width 24: the scalar form, one head an item */
  check_cpu_form("q: f32[1,6,1,24]; k: f32[1,2,seq,24]; v: f32[1,2,seq,24]\nreturn attention(q, k, v, true)", 0, 1, 0,
                 (const char *[]){"float lt_q[24]", NULL});
  setenv("LATHE_DECODE_VEC", "0", 1);
  check_cpu_form(paged, 0, 1, 0, (const char *[]){"float lt_q[64], lt_o[64]", NULL});
  unsetenv("LATHE_DECODE_VEC");
}

/* Flash-decoding is f32 on CUDA cores, so it stays at --matmul-precision highest; the scores and
 * softmax kernels then still run where P x V's (CUDA-core) blocked variant runs. LATHE_FLASH_DECODE=0
 * keeps the three kernels. */
static void decode_at_every_precision_and_off_switch(void **state) {
  (void)state;
  Compilation *c = compiled(CAUSAL_GQA, TARGET_CUDA, MM_HIGHEST);
  assert_non_null(decode_of(c, 2));
  assert_string_equal(c->kernel->kernels[2].alt->name, "attention_2_rows8");
  for (int i = 0; i < 2; i++) {
    const KKernel *k = &c->kernel->kernels[i];
    assert_true(k->skip);
    assert_non_null(k->alt);
    assert_false(k->alt->skip);
    assert_ptr_equal(k->alt_when, c->kernel->kernels[2].alt_when);
  }
  assert_string_equal(c->kernel->kernels[0].alt->name, "attention_0_rows8"); /* its own blocked variant */
  assert_string_equal(c->kernel->kernels[1].alt->name, "attention_1");       /* softmax has none: itself */
  char *kern = printed(c, ST_KERNEL);
  assert_contains(kern,
                  "kernel attention_0: nothing: attention_2 computes it\n\nvariant, launched instead when 8 <= seq:");
  free(kern);
  nvrtc_compiles(c);
  compilation_free(c);
  setenv("LATHE_FLASH_DECODE", "0", 1);
  c = compiled(CAUSAL_GQA, TARGET_CUDA, MM_HIGH);
  unsetenv("LATHE_FLASH_DECODE");
  assert_null(decode_of(c, 2));
  assert_non_null(flash_of(c, 2));
  assert_false(c->kernel->kernels[0].skip);
  assert_true(c->kernel->kernels[0].alt->skip);
  compilation_free(c);
  /* the CPU's is one kernel for every number of query rows: no blocked variant, the scores and softmax kernels
   * launch nothing at any size; LATHE_FLASH_DECODE=0 keeps the three kernels there too */
  c = compiled(CAUSAL_GQA, TARGET_CPU, MM_HIGH);
  assert_non_null(decode_of(c, 2));
  assert_null(c->kernel->kernels[2].alt);
  for (int i = 0; i < 2; i++) {
    assert_true(c->kernel->kernels[i].skip);
    assert_null(c->kernel->kernels[i].alt);
  }
  compilation_free(c);
  setenv("LATHE_FLASH_DECODE", "0", 1);
  c = compiled(CAUSAL_GQA, TARGET_CPU, MM_HIGH);
  unsetenv("LATHE_FLASH_DECODE");
  for (int i = 0; i < c->kernel->nkernels; i++) {
    assert_null(decode_of(c, i));
    assert_false(c->kernel->kernels[i].skip);
  }
  compilation_free(c);
}

/* Shapes the template must handle: k and v shared by all six heads (multi-query: six rows a block),
 * heads flattened into the output's columns, widths of 100 (no power of two), several query rows;
 * all compile under NVRTC. A head dimension beyond 128 keeps the three kernels. */
static void decode_shapes(void **state) {
  (void)state;
  Compilation *c = compiled("q: f32[1,6,1,32]; k: f32[1,1,n,32]; v: f32[1,1,n,32]\n"
                            "return reshape(permute(attention(q, k, v, true), [0, 2, 1, 3]), [1, 1, 192])",
                            TARGET_CUDA, MM_HIGH);
  int last = c->kernel->nkernels - 1;
  const KFlash *f = decode_of(c, last);
  assert_non_null(f);
  assert_int_equal(f->rows, 6);
  assert_int_equal(f->width, 32);
  nvrtc_compiles(c);
  compilation_free(c);
  c = compiled("q: f32[1,4,seq,64]; k: f32[1,2,seq,64]; v: f32[1,2,seq,64]\n"
               "return reshape(permute(attention(q, k, v, true), [0, 2, 1, 3]), [1, seq, 256])",
               TARGET_CUDA, MM_HIGH);
  last = c->kernel->nkernels - 1;
  f = decode_of(c, last);
  assert_non_null(f);
  assert_int_equal(f->rows, 2); /* v's index, (g * 64 + c) // 128, is read as g // 2 */
  assert_non_null(f->t_last);
  char *kern = printed(c, ST_KERNEL);
  assert_contains(kern, "v[0, g5 // 2, r0, c6 % 64]");
  free(kern);
  nvrtc_compiles(c);
  compilation_free(c);
  c = compiled("q: f32[1,6,seq,100]; k: f32[1,3,seq,100]; v: f32[1,3,seq,100]\nreturn attention(q, k, v, false)",
               TARGET_CUDA, MM_HIGH);
  f = decode_of(c, 2);
  assert_non_null(f);
  assert_int_equal(f->d_extent, 100);
  assert_int_equal(f->width, 100);
  assert_null(flash_of(c, 2)); /* tensor cores want multiples of 16 */
  nvrtc_compiles(c);
  compilation_free(c);
  c = compiled("q: f32[1,2,1,256]; k: f32[1,2,n,256]; v: f32[1,2,n,256]\nreturn attention(q, k, v, true)", TARGET_CUDA,
               MM_HIGH);
  for (int i = 0; i < c->kernel->nkernels; i++) {
    assert_null(decode_of(c, i));
    assert_false(c->kernel->kernels[i].skip);
  }
  compilation_free(c);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(decode_is_one_kernel_per_kv_head),
      cmocka_unit_test(decode_at_every_precision_and_off_switch),
      cmocka_unit_test(decode_shapes),
      cmocka_unit_test(decode_vector_rows),
      cmocka_unit_test(cpu_vector_form),
      cmocka_unit_test(causal_gqa_is_one_kernel),
      cmocka_unit_test(precision_picks_parts),
      cmocka_unit_test(unmasked_and_flattened_heads),
      cmocka_unit_test(written_out_attention_and_refusals),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
