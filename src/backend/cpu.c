/* CPU backend: host memory, C source compiled by the system compiler into a shared object
 * (through the on-disk cache), loaded with dlopen and called through the code.h C ABI. */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../base/hash.h"
#include "../base/settings.h"
#include "../base/mem.h"
#include "backend.h"
#include "cache.h"

extern char **environ;

/* Reassociation lets the compiler vectorize float sum reductions (dot products); NaN and infinity
 * semantics are kept (no -ffinite-math-only), so results stay within the f32 check tolerances.
 * -std=c11 alone turns floating-point contraction off, which left every a * b + acc of a dot product
 * a multiply and an add: -ffp-contract=fast makes them FMAs. GCC's default for AVX-512 machines is
 * 256-bit vectors; 512 bits do half the instructions per element in the (compute-bound) batched GEMMs
 * (SmolLM2's gate/up projection over 8 rows: 0.66 -> 0.46 ms on one core, both flags together). */
#define CPU_FLAGS                                                                                                      \
  "-O3 -march=native -fopenmp -shared -fPIC -std=c11 -fno-math-errno -fassociative-math -fno-signed-zeros "            \
  "-fno-trapping-math -ffp-contract=fast -mprefer-vector-width=512"
#define CPU_LIBS "-lm"
#define MAX_ARGS 64

typedef struct CpuImpl {
  char cc[256];          /* $LATHE_CC or "cc"; may hold extra words, e.g. "ccache gcc" */
  char compiler_id[256]; /* first line of `$CC --version`, part of every cache key */
  int have_id;
  int compiles, cache_hits;
} CpuImpl;

typedef void (*CpuKernelFn)(void *const *bufs, const int64_t *syms);

typedef struct CpuSym {
  char *name;
  CpuKernelFn fn;
} CpuSym;

/* What a BackendModule* points to on this backend. */
typedef struct CpuModule {
  void *dl;
  int image_fd; /* the sealed memfd it was loaded from, open while loaded (its /proc name stays unique); -1 */
  CpuSym *syms; /* kernels already looked up, so launches skip dlsym */
  int nsyms, cap;
} CpuModule;

static CpuImpl *impl_of(Backend *b) { return (CpuImpl *)b->impl; }

/* ---- memory ---- */

static void *cpu_alloc(Backend *b, size_t bytes, Diag *d) {
  size_t rounded = (bytes + 63) / 64 * 64;
  if (rounded == 0) rounded = 64; /* zero-size buffers still get a distinct valid pointer */
  void *p = aligned_alloc(64, rounded);
  if (!p) diag_error(d, 0, 0, "out of memory: %zu bytes for a CPU buffer", bytes);
  return p;
}

static void cpu_free(Backend *b, void *ptr) { free(ptr); }

static int cpu_copy(Backend *b, void *dst, const void *src, size_t bytes, Diag *d) {
  if (bytes) memcpy(dst, src, bytes);
  return 1;
}

static int cpu_sync(Backend *b, Diag *d) { return 1; }

/* ---- running the compiler ---- */

/* Splits s into whitespace-separated words written into buf, appending pointers to argv. */
static int split_words(char *buf, size_t n, const char *s, char **argv, int argc) {
  snprintf(buf, n, "%s", s);
  for (char *tok = strtok(buf, " \t"); tok && argc < MAX_ARGS - 1; tok = strtok(NULL, " \t")) argv[argc++] = tok;
  return argc;
}

/* Runs argv without a shell, stdout and stderr to out_fd. Returns the exit status, or -1 and
 * sets *err when the program cannot be started. */
static int run_program(char *const *argv, int out_fd, int *err) {
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, out_fd, STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&fa, out_fd, STDERR_FILENO);
  pid_t pid;
  int rc = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) {
    *err = rc;
    return -1;
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) {
      *err = errno;
      return -1;
    }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

/* First line of `$CC --version`; the compiler name alone if that cannot be run. */
static void compute_compiler_id(CpuImpl *c) {
  c->have_id = 1;
  snprintf(c->compiler_id, sizeof c->compiler_id, "%s", c->cc);
  char words[256], *argv[MAX_ARGS];
  int argc = split_words(words, sizeof words, c->cc, argv, 0);
  if (argc == 0) return;
  argv[argc++] = "--version";
  argv[argc] = NULL;
  char tmpl[] = "/tmp/lathe-ccver-XXXXXX";
  int fd = mkstemp(tmpl);
  if (fd < 0) return;
  unlink(tmpl);
  int err = 0;
  if (run_program(argv, fd, &err) == 0) {
    char line[256] = {0};
    ssize_t got = pread(fd, line, sizeof line - 1, 0);
    if (got > 0) {
      line[got] = '\0';
      line[strcspn(line, "\n")] = '\0';
      if (line[0]) snprintf(c->compiler_id, sizeof c->compiler_id, "%s", line);
    }
  }
  close(fd);
}

/* Puts the compiler's first error (and the few lines after it) into the diag; the lines before
 * the first "error" are usually only "In function ..." context. */
static void diag_compiler_output(Diag *d, const char *err_path, const char *src_path, int status) {
  char lines[64][160];
  int nlines = 0, first_error = -1;
  FILE *f = fopen(err_path, "r");
  if (f) {
    while (nlines < 64 && fgets(lines[nlines], sizeof lines[nlines], f)) {
      if (first_error < 0 && strstr(lines[nlines], "error")) first_error = nlines;
      nlines++;
    }
    fclose(f);
  }
  char text[420] = {0};
  size_t len = 0;
  int start = first_error < 0 ? 0 : first_error;
  size_t src_len = strlen(src_path);
  for (int i = start; i < nlines && i < start + 5; i++) {
    /* The temporary file name means nothing to the user; say which source it was instead. */
    const char *line = lines[i];
    if (!strncmp(line, src_path, src_len)) {
      const char *tag = "kernel.c";
      size_t tl = strlen(tag) < sizeof text - 1 - len ? strlen(tag) : sizeof text - 1 - len;
      memcpy(text + len, tag, tl);
      len += tl;
      line += src_len;
    }
    size_t l = strlen(line);
    if (len + l >= sizeof text) l = sizeof text - 1 - len;
    memcpy(text + len, line, l);
    len += l;
    text[len] = '\0';
  }
  while (len && (text[len - 1] == '\n' || text[len - 1] == ' ')) text[--len] = '\0';
  if (len) diag_error(d, 0, 0, "C compiler failed: %s", text);
  else diag_error(d, 0, 0, "C compiler failed with exit status %d and no message", status);
}

/* Creates a unique empty file "<dir>/.tmp-<key>-XXXXXX<suffix>"; path receives its name. */
static int make_temp(char *path, size_t n, const char *dir, uint64_t key, const char *suffix) {
  snprintf(path, n, "%s/.tmp-%016" PRIx64 "-XXXXXX%s", dir, key, suffix);
  int fd = mkstemps(path, (int)strlen(suffix));
  if (fd < 0) path[0] = '\0';
  return fd;
}

static int write_all(int fd, const char *s, size_t n) {
  while (n) {
    ssize_t w = write(fd, s, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return 0;
    }
    s += w;
    n -= (size_t)w;
  }
  return 1;
}

/* Compiles source into final_so (atomically, via a temp name in dir). Returns 1 on success,
 * 0 when the compiler failed (final), -1 when dir is not usable (the caller may try elsewhere). */
static int compile_to(CpuImpl *c, const char *dir, uint64_t key, const char *source, const char *final_so, Diag *d) {
  char src_path[4200], so_path[4200], err_path[4200];
  int src_fd = make_temp(src_path, sizeof src_path, dir, key, ".c");
  int so_fd = make_temp(so_path, sizeof so_path, dir, key, ".so");
  int err_fd = make_temp(err_path, sizeof err_path, dir, key, ".err");
  int ok = 0;
  if (src_fd < 0 || so_fd < 0 || err_fd < 0) {
    diag_error(d, 0, 0, "cpu: cannot create temporary files in %s: %s", dir, strerror(errno));
    ok = -1;
    goto done;
  }
  if (!write_all(src_fd, source, strlen(source))) {
    diag_error(d, 0, 0, "cpu: cannot write %s: %s", src_path, strerror(errno));
    ok = -1;
    goto done;
  }
  char cc_words[256], flag_words[256], lib_words[64], *argv[MAX_ARGS];
  int argc = split_words(cc_words, sizeof cc_words, c->cc, argv, 0);
  if (argc == 0) {
    diag_error(d, 0, 0, "cpu: LATHE_CC is empty");
    goto done;
  }
  argc = split_words(flag_words, sizeof flag_words, CPU_FLAGS, argv, argc);
  argv[argc++] = "-o";
  argv[argc++] = so_path;
  argv[argc++] = src_path;
  argc = split_words(lib_words, sizeof lib_words, CPU_LIBS, argv, argc);
  argv[argc] = NULL;
  c->compiles++;
  int err = 0;
  int status = run_program(argv, err_fd, &err);
  if (status < 0) {
    diag_error(d, 0, 0, "cpu: cannot run C compiler '%s': %s", argv[0], strerror(err));
    goto done;
  }
  if (status != 0) {
    diag_compiler_output(d, err_path, src_path, status);
    goto done;
  }
  char why[256];
  if (!cache_seal_file(so_path, key, why, sizeof why)) {
    diag_error(d, 0, 0, "cpu: %s in %s", why, dir);
    ok = -1;
    goto done;
  }
  if (rename(so_path, final_so) != 0) {
    diag_error(d, 0, 0, "cpu: cannot rename %s to %s: %s", so_path, final_so, strerror(errno));
    ok = -1;
    goto done;
  }
  so_path[0] = '\0';
  ok = 1;
done:
  if (src_fd >= 0) close(src_fd);
  if (so_fd >= 0) close(so_fd);
  if (err_fd >= 0) close(err_fd);
  if (src_path[0]) unlink(src_path);
  if (so_path[0]) unlink(so_path);
  if (err_path[0]) unlink(err_path);
  return ok;
}

/* The OpenMP runtime a module pulls in keeps a pool of worker threads alive; if the last module's
 * dlclose unloaded it, those threads would run unmapped code. Mark whichever runtime is loaded
 * as never-unload (RTLD_NODELETE outlives the handle, which is closed again at once). */
static void pin_openmp_runtime(void) {
  static const char *const names[] = {"libgomp.so.1", "libomp.so", "libomp.so.5", "libiomp5.so"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    void *h = dlopen(names[i], RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE);
    if (h) dlclose(h);
  }
}

static CpuModule *module_wrap(void *dl, int image_fd, Diag *d) {
  pin_openmp_runtime();
  CpuModule *m = mem_calloc(d, 1, sizeof *m, "a CPU module");
  if (!m) {
    dlclose(dl);
    if (image_fd >= 0) close(image_fd);
    return NULL;
  }
  m->dl = dl;
  m->image_fd = image_fd;
  return m;
}

static CpuModule *module_open(const char *path, Diag *d) {
  void *dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!dl) {
    const char *why = dlerror();
    diag_error(d, 0, 0, "cpu: cannot load %s: %s", path, why ? why : "unknown error");
    return NULL;
  }
  return module_wrap(dl, -1, d);
}

/* Loads a verified cache entry from its bytes, not from its path: the bytes go into a memfd that is sealed
 * against every change and dlopen'ed through /proc/self/fd, so what is loaded is exactly what was verified,
 * whatever happens to the cache file meanwhile (another process replacing or truncating it). The memfd
 * stays open while the module is loaded: glibc finds an already loaded object by its name, and an open fd's
 * number (so its /proc name) is not reused. Where memfds or /proc are unavailable, the verified file is
 * loaded by path, which leaves the short window between verifying and loading open to in-place writes. */
static CpuModule *module_open_image(const void *image, size_t size, const char *path, Diag *d) {
  int fd = memfd_create("lathe-cpu-module", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd >= 0) {
    const char *p = image;
    size_t left = size;
    while (left) {
      ssize_t w = write(fd, p, left);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) break;
      p += w;
      left -= (size_t)w;
    }
    char name[64];
    snprintf(name, sizeof name, "/proc/self/fd/%d", fd);
    void *dl = NULL;
    if (left == 0 && fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) == 0) {
      void *clash = dlopen(name, RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD); /* that name loaded by someone else */
      if (clash) dlclose(clash);
      else dl = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    }
    if (dl) return module_wrap(dl, fd, d);
    close(fd);
  }
  return module_open(path, d);
}

static uint64_t source_key(const CpuImpl *c, const char *source) {
  uint64_t h = hash_str(HASH_SEED, "lathe-cpu-v2"); /* v2: entries carry the cache.h trailer */
  h = hash_str(h, source);
  h = hash_str(h, c->compiler_id);
  h = hash_str(h, CPU_FLAGS " " CPU_LIBS);
  return h;
}

/* The verified entry for key in dir: its module, or NULL with *bad set when the entry was damaged
 * (removed, with a warning) and NULL without it on a miss. A verified entry that does not load is an error. */
static CpuModule *load_cached(const char *so, uint64_t key, int *bad, Diag *d) {
  void *image;
  size_t size;
  char why[256];
  *bad = 0;
  CacheLookup r = cache_load(so, key, &image, &size, why, sizeof why);
  if (r == CACHE_MISS) return NULL;
  if (r == CACHE_NOMEM) {
    diag_error(d, 0, 0, "%s", why);
    return NULL;
  }
  if (r == CACHE_BAD) {
    cache_discard(so, why);
    *bad = 1;
    return NULL;
  }
  Diag ld = {0};
  CpuModule *m = module_open_image(image, size, so, &ld);
  free(image);
  if (!m) { /* intact but unloadable (e.g. a runtime library changed since): rebuild it */
    cache_discard(so, ld.msg);
    *bad = 1;
  }
  return m;
}

static BackendModule *cpu_compile(Backend *b, const char *source, Diag *d) {
  CpuImpl *c = impl_of(b);
  if (!c->have_id) compute_compiler_id(c);
  uint64_t key = source_key(c, source);
  char so[4200];
  const char *dir = cache_dir();
  Diag cd = {0};
  if (dir) {
    snprintf(so, sizeof so, "%s/%016" PRIx64 ".so", dir, key);
    int bad;
    CpuModule *m = load_cached(so, key, &bad, d);
    if (m) c->cache_hits++;
    if (m || d->set) return (BackendModule *)m;
    int rc = compile_to(c, dir, key, source, so, &cd);
    if (rc > 0) {
      if ((m = load_cached(so, key, &bad, d)) || d->set) return (BackendModule *)m;
      diag_error(&cd, 0, 0, "the entry just written does not load or verify");
    }
    /* A failure in the cache directory (full, not writable, or an entry that cannot be replaced) falls back
     * to a private temporary directory, with a warning; a compiler error there too is the error reported. A
     * full disk often makes the compiler fail with no message, so every failure here is retried. */
  }
  char tmpdir[] = "/tmp/lathe-cpu-XXXXXX";
  if (!mkdtemp(tmpdir)) {
    if (cd.set) *d = cd;
    else diag_error(d, 0, 0, "cpu: no usable cache directory and cannot create a temporary one: %s", strerror(errno));
    return NULL;
  }
  snprintf(so, sizeof so, "%s/%016" PRIx64 ".so", tmpdir, key);
  CpuModule *m = NULL;
  Diag td = {0};
  if (compile_to(c, tmpdir, key, source, so, &td) > 0) {
    m = module_open(so, d);
    unlink(so);
    if (m && dir) cache_warn_fallback(dir, cd.msg);
    else if (m) cache_warn_fallback(cache_dir_failure(), NULL);
  } else {
    *d = td;
  }
  rmdir(tmpdir);
  return (BackendModule *)m;
}

static void cpu_module_free(Backend *b, BackendModule *bm) {
  CpuModule *m = (CpuModule *)bm;
  if (!m) return;
  for (int i = 0; i < m->nsyms; i++) free(m->syms[i].name);
  free(m->syms);
  if (m->dl) dlclose(m->dl);
  if (m->image_fd >= 0) {
    /* If something keeps the object loaded past dlclose, its /proc name must not be reused: keep the fd. */
    char name[64];
    snprintf(name, sizeof name, "/proc/self/fd/%d", m->image_fd);
    void *still = dlopen(name, RTLD_NOW | RTLD_NOLOAD);
    if (still) dlclose(still);
    else close(m->image_fd);
  }
  free(m);
}

static CpuKernelFn lookup_kernel(CpuModule *m, const char *name) {
  for (int i = 0; i < m->nsyms; i++)
    if (!strcmp(m->syms[i].name, name)) return m->syms[i].fn;
  void *sym = dlsym(m->dl, name);
  if (!sym) return NULL;
  CpuKernelFn fn;
  memcpy(&fn, &sym, sizeof fn); /* object pointer -> function pointer, as POSIX dlsym intends */
  if (m->nsyms == m->cap) {
    int cap = m->cap ? 2 * m->cap : 8;
    CpuSym *grown = xrealloc(m->syms, sizeof *grown * (size_t)cap, "the kernel table");
    if (!grown) return fn; /* still callable, just not remembered */
    m->syms = grown;
    m->cap = cap;
  }
  char *copy = xstrdup(name, "a kernel name");
  if (copy) m->syms[m->nsyms++] = (CpuSym){copy, fn};
  return fn;
}

static int cpu_launch(Backend *b, BackendModule *bm, const char *name, void *const *bufs, int nbufs,
                      const int64_t *syms, int nsyms, int64_t grid, int block, Diag *d) {
  CpuModule *m = (CpuModule *)bm;
  if (!m || !name) {
    diag_error(d, 0, 0, "cpu: launch without a module or kernel name");
    return 0;
  }
  CpuKernelFn fn = lookup_kernel(m, name);
  if (!fn) {
    diag_error(d, 0, 0, "kernel '%s' not found in module", name);
    return 0;
  }
  static const int64_t no_syms[1] = {0};
  fn(bufs, nsyms > 0 ? syms : no_syms);
  return 1;
}

/* Graphs on the CPU: a recorded list of calls replayed in order. It saves nothing here, but it runs
 * the plan's graph path (build, update in place, replay) in every CPU test. */
#define CPU_GRAPH_ARGS 48
typedef struct CpuNode {
  CpuKernelFn fn;
  void *bufs[CPU_GRAPH_ARGS];
  int64_t syms[16];
} CpuNode;

struct BackendGraph {
  CpuNode *nodes;
  int n, cap, ready;
};

static BackendGraph *cpu_graph_new(Backend *b, Diag *d) {
  BackendGraph *g = xcalloc(1, sizeof *g, "a CPU graph");
  return g;
}

static int set_node(CpuNode *n, void *const *bufs, int nbufs, const int64_t *syms, int nsyms, Diag *d) {
  if (nbufs < 0 || nbufs > CPU_GRAPH_ARGS || nsyms < 0 || nsyms > 16) {
    diag_error(d, 0, 0, "cpu graph: %d buffers and %d symbols exceed the limits", nbufs, nsyms);
    return 0;
  }
  memcpy(n->bufs, bufs, sizeof(void *) * (size_t)nbufs);
  memset(n->syms, 0, sizeof n->syms);
  memcpy(n->syms, syms, sizeof(int64_t) * (size_t)nsyms);
  return 1;
}

static int cpu_graph_add(Backend *b, BackendGraph *g, BackendModule *bm, const char *name, void *const *bufs, int nbufs,
                         const int64_t *syms, int nsyms, int64_t grid, int block, Diag *d) {
  CpuKernelFn fn = bm ? lookup_kernel((CpuModule *)bm, name) : NULL;
  if (!fn) {
    diag_error(d, 0, 0, "kernel '%s' not found in module", name ? name : "?");
    return 0;
  }
  if (g->n == g->cap) {
    g->cap = g->cap ? 2 * g->cap : 64;
    g->nodes = xrealloc(g->nodes, sizeof *g->nodes * (size_t)g->cap, "a CPU graph");
  }
  g->nodes[g->n].fn = fn;
  if (!set_node(&g->nodes[g->n], bufs, nbufs, syms, nsyms, d)) return 0;
  g->n++;
  return 1;
}

static int cpu_graph_instantiate(Backend *b, BackendGraph *g, Diag *d) {
  g->ready = 1;
  return 1;
}

static int cpu_graph_update(Backend *b, BackendGraph *g, int node, void *const *bufs, int nbufs, const int64_t *syms,
                            int nsyms, int64_t grid, Diag *d) {
  if (!g->ready || node < 0 || node >= g->n) {
    diag_error(d, 0, 0, "cpu graph: node %d does not exist", node);
    return 0;
  }
  return set_node(&g->nodes[node], bufs, nbufs, syms, nsyms, d);
}

static int cpu_graph_launch(Backend *b, BackendGraph *g, Diag *d) {
  if (!g->ready) {
    diag_error(d, 0, 0, "cpu graph: launched before it was instantiated");
    return 0;
  }
  for (int i = 0; i < g->n; i++) g->nodes[i].fn(g->nodes[i].bufs, g->nodes[i].syms);
  return 1;
}

static void cpu_graph_free(Backend *b, BackendGraph *g) {
  if (!g) return;
  free(g->nodes);
  free(g);
}

static void cpu_destroy(Backend *b) {
  if (!b) return;
  free(b->impl);
  free(b);
}

/* MemAvailable of /proc/meminfo: what allocations can take without swapping. */
static size_t cpu_memory_free(Backend *b) {
  (void)b;
  FILE *f = fopen("/proc/meminfo", "r");
  if (!f) return 0;
  char line[256];
  unsigned long long kb = 0;
  while (fgets(line, sizeof line, f))
    if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1) break;
  fclose(f);
  return (size_t)kb * 1024;
}

static const BackendOps cpu_ops = {
    .name = "cpu",
    .memory_free = cpu_memory_free,
    .alloc = cpu_alloc,
    .free = cpu_free,
    .upload = cpu_copy,
    .download = cpu_copy,
    .compile = cpu_compile,
    .module_free = cpu_module_free,
    .launch = cpu_launch,
    .sync = cpu_sync,
    .destroy = cpu_destroy,
    .graph_new = cpu_graph_new,
    .graph_add = cpu_graph_add,
    .graph_instantiate = cpu_graph_instantiate,
    .graph_update = cpu_graph_update,
    .graph_launch = cpu_graph_launch,
    .graph_free = cpu_graph_free,
};

Backend *backend_cpu_new(Diag *d) {
  Backend *b = xcalloc(1, sizeof *b, "the CPU backend");
  CpuImpl *c = xcalloc(1, sizeof *c, "the CPU backend");
  if (!b || !c) {
    free(b);
    free(c);
    diag_error(d, 0, 0, "cpu: out of memory");
    return NULL;
  }
  const char *cc = setting_str(SET_CC);
  snprintf(c->cc, sizeof c->cc, "%s", cc ? cc : setting_info(SET_CC)->def);
  b->ops = &cpu_ops;
  target_host(&b->target);
  b->impl = c;
  return b;
}

void backend_cpu_stats(Backend *b, int *compiles, int *cache_hits) {
  CpuImpl *c = b && b->ops == &cpu_ops ? impl_of(b) : NULL;
  if (compiles) *compiles = c ? c->compiles : 0;
  if (cache_hits) *cache_hits = c ? c->cache_hits : 0;
}
