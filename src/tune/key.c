/* Structural identities of kernels, buckets of symbol values, device identities. */
#include "key.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "../base/hash.h"

typedef struct Canon {
  const LProgram *p;
  const LKernel *k;
  int *order; /* per buffer id: its canonical number + 1, 0 = not seen yet */
  int seen;
  char names[64][96];
  int nnames;
} Canon;

static const char *canon_var(void *ctx, int v) {
  static char buf[16][12];
  static int next;
  char *s = buf[next++ % 16];
  snprintf(s, 12, "v%d", v); /* variable ids are assigned in nest order, so they are structural */
  (void)ctx;
  return s;
}

static const char *canon_buf(void *ctx, int b, MemSpace space) {
  Canon *c = ctx;
  (void)space;
  if (b < 0 || b >= c->p->nbufs) return "b?";
  int slot = c->order[b];
  if (!slot) slot = c->order[b] = ++c->seen;
  if (c->nnames == 64) c->nnames = 0; /* printed names are consumed at once; recycle the ring */
  char *s = c->names[c->nnames++];
  StrBuf sh = {0};
  shape_print(&sh, &c->p->bufs[b].shape);
  snprintf(s, 96, "b%d:%s%s", slot - 1, dtype_name(c->p->bufs[b].dtype), sb_str(&sh));
  sb_free(&sh);
  return s;
}

static const char *canon_acc(void *ctx, int i) {
  static char buf[L_MAX_PHASES][8];
  (void)ctx;
  if (i < 0 || i >= L_MAX_PHASES) return "acc?";
  snprintf(buf[i], 8, "acc%d", i);
  return buf[i];
}

static void axes_text(StrBuf *b, const LAxis *ax, int n) {
  for (int i = 0; i < n; i++) {
    sb_printf(b, " v%d<", ax[i].var);
    ex_print(b, ax[i].extent, NULL);
  }
}

void tune_kernel_key(const LProgram *p, const LKernel *k, MatmulPrecision mm, char out[24]) {
  Canon *c = calloc(1, sizeof *c);
  c->p = p;
  c->k = k;
  c->order = calloc((size_t)p->nbufs + 1, sizeof *c->order);
  ExprNames nm = {c, canon_var, canon_buf, NULL, canon_acc, NULL};
  StrBuf b = {0};
  sb_printf(&b, "mm=%s par", matmul_precision_name(mm));
  axes_text(&b, k->par, k->npar);
  for (int i = 0; i < k->nphase; i++) {
    const LPhase *f = &k->phases[i];
    sb_printf(&b, "\nphase %d %s%s", (int)f->op, dtype_name(f->acc_dtype), f->recompute ? " recompute" : "");
    axes_text(&b, f->axes, f->naxes);
    sb_puts(&b, ": ");
    ex_print(&b, f->body, &nm);
  }
  sb_puts(&b, "\ninner");
  axes_text(&b, k->inner, k->ninner);
  sb_printf(&b, "\nstore %s", canon_buf(c, k->out_buf, 0));
  for (int i = 0; i < p->bufs[k->out_buf].shape.rank; i++) {
    sb_puts(&b, i ? "," : "[");
    if (k->out_idx[i]) ex_print(&b, k->out_idx[i], &nm);
  }
  sb_puts(&b, "] = ");
  ex_print(&b, k->value, &nm);
  if (k->out_valid) {
    sb_puts(&b, " if ");
    ex_print(&b, k->out_valid, &nm);
  }
  snprintf(out, 24, "%016llx", (unsigned long long)hash_str(HASH_SEED, sb_str(&b)));
  sb_free(&b);
  free(c->order);
  free(c);
}

typedef struct Syms {
  const char *name[16];
  int n;
} Syms;

static void add_sym(Syms *s, const char *name) {
  for (int i = 0; i < s->n; i++)
    if (!strcmp(s->name[i], name)) return;
  if (s->n < 16) s->name[s->n++] = name;
}

static void sym_fn(void *ctx, const Expr *e) {
  if (e->op == X_SYM && e->name) add_sym(ctx, e->name);
}

static void syms_of_axes(Syms *s, const LAxis *ax, int n) {
  for (int i = 0; i < n; i++) ex_visit(ax[i].extent, sym_fn, s);
}

typedef struct BufScan {
  const LProgram *p;
  Syms *s;
} BufScan;

static void buf_fn(void *ctx, const Expr *e) {
  BufScan *b = ctx;
  if (e->op != X_LOAD) return;
  /* a load's buffer shape (a KV cache of max_ctx positions) */
  for (int i = 0; i < b->p->nbufs; i++)
    if (b->p->bufs[i].id == e->ival)
      for (int j = 0; j < b->p->bufs[i].shape.rank; j++) ex_visit(b->p->bufs[i].shape.dim[j], sym_fn, b->s);
}

static int by_name(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

void tune_kernel_bucket(const LProgram *p, const LKernel *k, const SymEnv *env, char *out, size_t n) {
  Syms s = {{0}, 0};
  syms_of_axes(&s, k->par, k->npar);
  syms_of_axes(&s, k->inner, k->ninner);
  BufScan bs = {p, &s};
  for (int i = 0; i < k->nphase; i++) {
    syms_of_axes(&s, k->phases[i].axes, k->phases[i].naxes);
    ex_visit(k->phases[i].body, sym_fn, &s);
    ex_visit(k->phases[i].body, buf_fn, &bs);
  }
  ex_visit(k->value, sym_fn, &s);
  ex_visit(k->value, buf_fn, &bs);
  qsort(s.name, (size_t)s.n, sizeof s.name[0], by_name);
  size_t len = 0;
  out[0] = 0;
  for (int i = 0; i < s.n && len < n; i++) {
    int64_t v;
    int w;
    if (!env || !symenv_get(env, s.name[i], &v)) {
      w = snprintf(out + len, n - len, "%s%s=?", i ? " " : "", s.name[i]);
    } else {
      int64_t b = 1;
      while (b < v) b *= 2;
      w = snprintf(out + len, n - len, "%s%s=%lld", i ? " " : "", s.name[i], (long long)(v <= 0 ? 0 : b));
    }
    if (w < 0) break;
    len += (size_t)w;
  }
}

/* The processor's model name, from /proc/cpuinfo ("" where there is none). */
static void cpu_model(char *out, size_t n) {
  out[0] = 0;
  FILE *f = fopen("/proc/cpuinfo", "r");
  if (!f) return;
  char line[512];
  while (fgets(line, sizeof line, f)) {
    if (strncmp(line, "model name", 10)) continue;
    const char *v = strchr(line, ':');
    if (!v) continue;
    v++;
    while (*v == ' ' || *v == '\t') v++;
    snprintf(out, n, "%.*s", (int)strcspn(v, "\n"), v);
    break;
  }
  fclose(f);
}

void tune_device_identity(const TargetDesc *t, int driver, char *out, size_t n) {
  if (t->kind == TARGET_CPU) {
    char model[200];
    cpu_model(model, sizeof model);
    /* a description changed by overrides (lathe tune --device-override) is named NAME:FIELD=V: not this CPU's */
    const char *changed = strchr(t->name, ':') ? t->name : NULL;
    snprintf(out, n, "cpu %s, %d cores%s%s", model[0] ? model : t->name, t->cores, changed ? ", as " : "",
             changed ? changed : "");
  } else {
    snprintf(out, n, "cuda %s, sm_%d%d, %d SMs, memory %d kHz x %d bits, driver %d", t->name, t->cc_major, t->cc_minor,
             t->sms, t->mem_clock_khz, t->bus_width_bits, driver);
  }
}
