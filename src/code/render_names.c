/* The names of a kernel's generated code: every buffer, symbol, loop variable, temporary and shared array gets a
 * C identifier of its own, close to the program's name for it and outside the generated code's namespace. */
#include "render_common.h"
#include "../base/hash.h"
#include "../base/mem.h"
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t str_hash(const char *s) { return hash_str(HASH_SEED, s); }

static int names_has(const NameSet *ns, const char *s) {
  if (!ns->cap) return 0;
  for (size_t i = str_hash(s) & (ns->cap - 1);; i = (i + 1) & (ns->cap - 1)) {
    if (!ns->slots[i]) return 0;
    if (!strcmp(ns->slots[i], s)) return 1;
  }
}

static char *names_add(NameSet *ns, const char *s) {
  if ((ns->n + 1) * 2 > ns->cap) {
    NameSet g = {0};
    g.cap = ns->cap ? ns->cap * 2 : 256;
    g.slots = xcalloc(g.cap, sizeof *g.slots, "the name table");
    for (size_t i = 0; i < ns->cap; i++)
      if (ns->slots[i]) {
        size_t j = str_hash(ns->slots[i]) & (g.cap - 1);
        while (g.slots[j]) j = (j + 1) & (g.cap - 1);
        g.slots[j] = ns->slots[i];
      }
    g.n = ns->n;
    free(ns->slots);
    *ns = g;
  }
  size_t i = str_hash(s) & (ns->cap - 1);
  while (ns->slots[i]) i = (i + 1) & (ns->cap - 1);
  ns->slots[i] = xstrdup(s, "a name");
  ns->n++;
  return ns->slots[i];
}

static void names_free(NameSet *ns) {
  for (size_t i = 0; i < ns->cap; i++) free(ns->slots[i]);
  free(ns->slots);
  memset(ns, 0, sizeof *ns);
}

/* Names. The generated code's own names are in a namespace no name of the program can enter:
 *  - every name the renderers write literally (locals and helpers of the preamble and of the template
 *    kernels: lt_tid, lt_acc, lt_f32_to_bf16, lt_bufs, ...) begins with "lt_";
 *  - every other name (buffers, symbols, loop variables, temporaries, shared arrays, CSE values) comes
 *    from rc_unique_name, which never returns a name beginning with "lt_" or "_" (the implementation's,
 *    and NVRTC's) or without a lower-case letter (macros of the C headers: NAN, M_PI, INT64_MAX), and
 *    never one of the words below: the languages' keywords and the types, functions and built-ins the
 *    generated expressions name, a fixed list of the languages, not of the generated code. */
static const char *const reserved[] = {
    /* C and C++ keywords (C++ because CUDA C is C++), including C++'s alternative operator spellings */
    "alignas", "alignof", "and", "and_eq", "asm", "auto", "bitand", "bitor", "bool", "break", "case", "catch", "char",
    "char8_t", "char16_t", "char32_t", "class", "compl", "concept", "const", "consteval", "constexpr", "constinit",
    "const_cast", "continue", "co_await", "co_return", "co_yield", "decltype", "default", "delete", "do", "double",
    "dynamic_cast", "else", "enum", "explicit", "export", "extern", "false", "float", "for", "friend", "goto", "if",
    "inline", "int", "long", "mutable", "namespace", "new", "noexcept", "not", "not_eq", "nullptr", "operator", "or",
    "or_eq", "private", "protected", "public", "register", "reinterpret_cast", "requires", "restrict", "return",
    "short", "signed", "sizeof", "static", "static_assert", "static_cast", "struct", "switch", "template", "this",
    "thread_local", "throw", "true", "try", "typedef", "typeid", "typename", "union", "unsigned", "using", "virtual",
    "void", "volatile", "wchar_t", "while", "main",
    /* types: <stdint.h>'s and the CUDA preamble's */
    "i64", "int64_t", "int32_t", "int16_t", "int8_t", "uint64_t", "uint32_t", "uint16_t", "uint8_t", "uintptr_t",
    /* functions the generated expressions call, and CUDA's built-in variables and functions */
    "expf", "logf", "sqrtf", "tanhf", "erff", "sinf", "cosf", "powf", "fmaxf", "fminf", "fabsf", "max", "min",
    "math_errhandling", "threadIdx", "blockIdx", "blockDim", "gridDim", "warpSize", "atomicAdd", "atomicMax",
    "atomicMin", "atomicExch", "atomicCAS", NULL};

int rc_is_identifier(const char *s) {
  if (!s || !(isalpha((unsigned char)*s) || *s == '_')) return 0;
  for (; *s; s++)
    if (!(isalnum((unsigned char)*s) || *s == '_')) return 0;
  return 1;
}

/* Whether a C identifier may name something of the program: see the comment on reserved[]. */
static int outside_generated_namespace(const char *s) {
  if (s[0] == '_' || (s[0] == 'l' && s[1] == 't' && (s[2] == '_' || !s[2]))) return 0;
  for (; *s; s++)
    if (islower((unsigned char)*s)) return 1;
  return 0;
}

/* A C identifier close to `base`, not used before in this kernel and outside the generated namespace
 * (a program's lt_M becomes u_lt_M, _x u_x, NAN u_NAN). The "_k" suffix of a repeated name cannot
 * move a name into it: "u_" or the name's first characters stay in front. */
const char *rc_unique_name(Render *R, const char *base) {
  char buf[96], raw[64];
  size_t n = 0;
  if (!base || !*base) base = "x";
  for (const char *c = base; *c && n < 60; c++) raw[n++] = isalnum((unsigned char)*c) ? *c : '_';
  raw[n] = 0;
  n = 0;
  if (!outside_generated_namespace(raw) || isdigit((unsigned char)raw[0])) {
    buf[n++] = 'u';
    if (raw[0] != '_') buf[n++] = '_';
  }
  memcpy(buf + n, raw, strlen(raw) + 1);
  n += strlen(raw);
  if (!names_has(&R->names, buf)) return names_add(&R->names, buf);
  for (int k = 1;; k++) {
    snprintf(buf + n, sizeof buf - n, "_%d", k);
    if (!names_has(&R->names, buf)) return names_add(&R->names, buf);
  }
}

static void name_stmt_tree(Render *R, const KStmt *s) {
  /* a template kernel's (KS_MMA, KS_FLASH) axis variables are its locals */
  int vars[2 * LT_MAX_RANK + 5], nv = 0;
  if (s->kind == KS_MMA && s->mma) {
    const KMma *m = s->mma;
    vars[nv++] = m->m_var;
    vars[nv++] = m->k_var;
    for (int i = 0; i < m->nn; i++) vars[nv++] = m->n_var[i];
    if (m->stat_body) vars[nv++] = m->stat_var;
  }
  if (s->kind == KS_FLASH && s->flash) {
    const KFlash *f = s->flash;
    vars[nv++] = f->m_var;
    vars[nv++] = f->t_var;
    vars[nv++] = f->d_var;
    for (int i = 0; i < f->ngroup; i++) vars[nv++] = f->group_var[i];
    for (int i = 0; i < f->nvalue; i++) vars[nv++] = f->value_var[i];
    if (f->k_row && f->v_row) {
      vars[nv++] = f->k_at_var;
      vars[nv++] = f->v_at_var;
    }
  }
  for (int i = 0; i < nv; i++)
    if (vars[i] >= 0 && vars[i] < L_MAX_VARS && !R->var_name[vars[i]])
      R->var_name[vars[i]] = rc_unique_name(R, vars[i] < R->kk->nvars ? R->kk->var_names[vars[i]] : "v");
  if ((s->kind == KS_FOR || s->kind == KS_PARFOR || s->kind == KS_QROW) && s->var >= 0 && s->var < L_MAX_VARS &&
      !R->var_name[s->var])
    R->var_name[s->var] = rc_unique_name(R, s->var < R->kk->nvars ? R->kk->var_names[s->var] : "i");
  if (s->kind == KS_SMEM || (s->kind == KS_QROW && s->dtype == DT_F32)) {
    if (s->buf < 0 || s->buf >= RC_MAX_SMEM) {
      rc_fail(R, "shared array %d out of range", s->buf);
      return;
    }
    char nm[32];
    snprintf(nm, sizeof nm, "smem%d", s->buf);
    R->smem_name[s->buf] = rc_unique_name(R, nm);
    R->smem_dtype[s->buf] = DT_F32 == s->dtype || s->kind == KS_SMEM ? s->dtype : DT_F32;
  }
  for (int i = 0; i < s->nbody; i++) name_stmt_tree(R, s->body[i]);
}

int rc_kernel_begin(Render *R, const KKernel *kk) {
  R->kk = kk;
  R->lp = R->kp->loop;
  R->pool = R->lp->pool;
  R->ncse = 0;
  memset(R->sym_name, 0, sizeof R->sym_name);
  memset(R->var_name, 0, sizeof R->var_name);
  memset(R->tmp_name, 0, sizeof R->tmp_name);
  memset(R->smem_name, 0, sizeof R->smem_name);
  R->buf_name = xcalloc((size_t)(R->lp->nbufs > 0 ? R->lp->nbufs : 1), sizeof *R->buf_name, "the buffer names");
  for (int i = 0; reserved[i]; i++) names_add(&R->names, reserved[i]);
  if (!rc_is_identifier(kk->name)) {
    rc_fail(R, "the kernel name is not a C identifier");
    return 0;
  }
  names_add(&R->names, kk->name);
  for (int i = 0; i < kk->nparams; i++) {
    int b = kk->params[i].buf;
    if (b < 0 || b >= R->lp->nbufs) {
      rc_fail(R, "parameter %d names buffer %d, which does not exist", i, b);
      return 0;
    }
    char canon[16];
    snprintf(canon, sizeof canon, "b%d", i);
    R->buf_name[b] = rc_unique_name(R, R->canonical ? canon : R->lp->bufs[b].name);
  }
  for (int i = 0; i < kk->nsyms; i++) R->sym_name[i] = rc_unique_name(R, kk->syms[i]);
  for (int i = 0; i < kk->ntmps; i++) R->tmp_name[i] = rc_unique_name(R, kk->tmp_names[i] ? kk->tmp_names[i] : "t");
  if (kk->body) name_stmt_tree(R, kk->body);
  return !R->failed;
}

void rc_kernel_end(Render *R) {
  free(R->buf_name);
  R->buf_name = NULL;
  names_free(&R->names);
}
