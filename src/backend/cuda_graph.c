/* The CUDA backend's graphs: a step's launches recorded once as a CUDA graph and replayed, kernel nodes
 * updated in place between steps, library GEMMs recorded by stream capture as child graphs. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "../base/mem.h"
#include "cuda_internal.h"

/* ---- graphs: a decode step as one CUDA graph, updated in place between steps ---- */

struct BackendGraph {
  CUgraph graph;
  CUgraphExec exec;
  CUgraphNode *nodes;
  CUfunction *fns; /* NULL: a recorded library call (a child graph), not a kernel */
  int *blocks;
  char (*names)[64];
  int n, cap;
};

/* Kernel-node parameters: cuGraphAddKernelNode / SetParams copy the values the pointers point to. */
static int node_params(CudaImpl *c, CudaKernelNodeParams *kp, CUfunction fn, void *const *bufs, int nbufs,
                       const int64_t *syms, int nsyms, int64_t grid, int block, CUdeviceptr *ptrs, long long *vals,
                       void **params, const char *name, Diag *d) {
  if (nbufs < 0 || nsyms < 0 || nbufs + nsyms > CUDA_MAX_ARGS || grid < 1 || grid > 0x7fffffff || block < 1 ||
      block > c->max_threads) {
    diag_error(d, 0, 0, "cuGraphAddKernelNode(%s): %d arguments, grid %" PRId64 ", block %d out of range", name,
               nbufs + nsyms, grid, block);
    return 0;
  }
  cuda_pack_args(bufs, nbufs, syms, nsyms, ptrs, vals, params);
  *kp = (CudaKernelNodeParams){fn, (unsigned)grid, 1, 1, (unsigned)block, 1, 1, 0, params, NULL};
  return 1;
}

BackendGraph *cuda_graph_new(Backend *b, Diag *d) {
  CudaImpl *c = cuda_impl(b);
  if (!c->drv.cuGraphCreate) {
    diag_error(d, 0, 0, "cuda: this driver has no graph API");
    return NULL;
  }
  BackendGraph *g = xcalloc(1, sizeof *g, "a CUDA graph");
  if (!cuda_make_current(c, d) || !cuda_check(c, d, c->drv.cuGraphCreate(&g->graph, 0), "cuGraphCreate", NULL)) {
    free(g);
    return NULL;
  }
  return g;
}

static void graph_reserve(BackendGraph *g) {
  if (g->n < g->cap) return;
  g->cap = g->cap ? g->cap * 2 : 256;
  g->nodes = xrealloc(g->nodes, sizeof *g->nodes * (size_t)g->cap, "a CUDA graph");
  g->fns = xrealloc(g->fns, sizeof *g->fns * (size_t)g->cap, "a CUDA graph");
  g->blocks = xrealloc(g->blocks, sizeof *g->blocks * (size_t)g->cap, "a CUDA graph");
  g->names = xrealloc(g->names, sizeof *g->names * (size_t)g->cap, "a CUDA graph");
}

int cuda_graph_add(Backend *b, BackendGraph *g, BackendModule *bm, const char *name, void *const *bufs, int nbufs,
                   const int64_t *syms, int nsyms, int64_t grid, int block, Diag *d) {
  CudaImpl *c = cuda_impl(b);
  CUfunction fn;
  if (!cuda_lookup_kernel(c, (CudaModule *)bm, name, &fn, d)) return 0;
  graph_reserve(g);
  CUdeviceptr ptrs[CUDA_MAX_ARGS];
  long long vals[CUDA_MAX_ARGS];
  void *params[CUDA_MAX_ARGS + 1];
  CudaKernelNodeParams kp;
  if (!node_params(c, &kp, fn, bufs, nbufs, syms, nsyms, grid, block, ptrs, vals, params, name, d)) return 0;
  /* Each kernel after the previous one. With programmatic edges the next kernel's blocks may start
   * while the previous kernel's last blocks run; every generated kernel first waits for its
   * predecessor to complete (griddepcontrol.wait, render_cuda.c), so only launch latency overlaps. */
  const CUgraphNode *dep = g->n ? &g->nodes[g->n - 1] : NULL;
  int programmatic = c->pdl && dep && g->fns[g->n - 1]; /* a programmatic edge starts at a kernel node */
  if (!cuda_check(c, d,
                  c->drv.cuGraphAddKernelNode(&g->nodes[g->n], g->graph, programmatic ? NULL : dep,
                                              programmatic ? 0 : (dep ? 1 : 0), &kp),
                  "cuGraphAddKernelNode", name))
    return 0;
  if (programmatic) {
    CudaGraphEdge e = {CU_GRAPH_KERNEL_NODE_PORT_PROGRAMMATIC, 0, CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC, {0}};
    if (c->drv.cuGraphAddDependencies_v2(g->graph, dep, &g->nodes[g->n], &e, 1) != CUDA_SUCCESS) {
      CudaGraphEdge plain = {0, 0, 0, {0}}; /* refused: an ordinary edge, and no more tries */
      c->pdl = 0;
      if (!cuda_check(c, d, c->drv.cuGraphAddDependencies_v2(g->graph, dep, &g->nodes[g->n], &plain, 1),
                      "cuGraphAddDependencies", name))
        return 0;
    }
  }
  g->fns[g->n] = fn;
  g->blocks[g->n] = block;
  snprintf(g->names[g->n], sizeof g->names[0], "%s", name);
  g->n++;
  return 1;
}

int cuda_graph_instantiate(Backend *b, BackendGraph *g, Diag *d) {
  CudaImpl *c = cuda_impl(b);
  return cuda_check(c, d, c->drv.cuGraphInstantiateWithFlags(&g->exec, g->graph, 0), "cuGraphInstantiateWithFlags",
                    NULL);
}

int cuda_graph_update(Backend *b, BackendGraph *g, int node, void *const *bufs, int nbufs, const int64_t *syms,
                      int nsyms, int64_t grid, Diag *d) {
  CudaImpl *c = cuda_impl(b);
  if (node < 0 || node >= g->n || !g->exec || !g->fns[node]) {
    diag_error(d, 0, 0, "cuda: graph node %d does not exist or is no kernel", node);
    return 0;
  }
  CUdeviceptr ptrs[CUDA_MAX_ARGS];
  long long vals[CUDA_MAX_ARGS];
  void *params[CUDA_MAX_ARGS + 1];
  CudaKernelNodeParams kp;
  if (!node_params(c, &kp, g->fns[node], bufs, nbufs, syms, nsyms, grid, g->blocks[node], ptrs, vals, params,
                   g->names[node], d))
    return 0;
  return cuda_check(c, d, c->drv.cuGraphExecKernelNodeSetParams(g->exec, g->nodes[node], &kp),
                    "cuGraphExecKernelNodeSetParams", g->names[node]);
}

int cuda_graph_launch(Backend *b, BackendGraph *g, Diag *d) {
  CudaImpl *c = cuda_impl(b);
  snprintf(c->last_kernel, sizeof c->last_kernel, "graph of %d kernels", g->n);
  return cuda_make_current(c, d) && cuda_check(c, d, c->drv.cuGraphLaunch(g->exec, NULL), "cuGraphLaunch", NULL);
}

void cuda_graph_free(Backend *b, BackendGraph *g) {
  if (!g) return;
  CudaImpl *c = cuda_impl(b);
  if (g->exec) c->drv.cuGraphExecDestroy(g->exec);
  if (g->graph) c->drv.cuGraphDestroy(g->graph);
  free(g->nodes);
  free(g->fns);
  free(g->blocks);
  free(g->names);
  free(g);
}

/* A library GEMM as a graph node: the call recorded on lathe's capture stream (after its algorithm was
 * chosen, outside the recording) becomes a child graph that runs after the graph's previous node. Its
 * pointers are fixed for the graph's life: the plan rebuilds a graph whose GEMM operands moved. */
int cuda_graph_add_gemm(Backend *b, BackendGraph *g, int64_t m, int64_t n, int64_t k, const void *a, const void *w,
                        const void *add, void *out, Diag *d) {
  CudaImpl *c = cuda_impl(b);
  if (!c->drv.cuStreamBeginCapture || !c->drv.cuGraphAddChildGraphNode) {
    diag_error(d, 0, 0, "cuda: this driver cannot record a library call into a graph");
    return 0;
  }
  if (!cuda_gemm_available(b)) {
    diag_error(d, 0, 0, "cuBLASLt is not available");
    return 0;
  }
  if (!cuda_make_current(c, d) || !cuda_choose_gemm_algo(c, m, n, k, a, w, out, d)) return 0;
  if (!c->capture && !cuda_check(c, d, c->drv.cuStreamCreate(&c->capture, 1 /* CU_STREAM_NON_BLOCKING */),
                                 "cuStreamCreate", "the graph recording stream"))
    return 0;
  graph_reserve(g);
  snprintf(g->names[g->n], sizeof g->names[0], "cuBLASLt %lldx%lldx%lld", (long long)m, (long long)n, (long long)k);
  if (!cuda_check(c, d, c->drv.cuStreamBeginCapture(c->capture, 1 /* CU_STREAM_CAPTURE_MODE_THREAD_LOCAL */),
                  "cuStreamBeginCapture", g->names[g->n]))
    return 0;
  Diag gd = {0};
  int ok = cublaslt_gemm(c->lt, m, n, k, a, w, add, out, -1, c->capture, &gd);
  CUgraph child = NULL;
  CUresult rc = c->drv.cuStreamEndCapture(c->capture, &child);
  if (!ok || rc != CUDA_SUCCESS || !child) {
    if (child) c->drv.cuGraphDestroy(child);
    if (!ok) diag_error(d, 0, 0, "%s", gd.msg);
    else cuda_check(c, d, rc ? rc : 1, "cuStreamEndCapture", g->names[g->n]);
    return 0;
  }
  const CUgraphNode *dep = g->n ? &g->nodes[g->n - 1] : NULL;
  rc = c->drv.cuGraphAddChildGraphNode(&g->nodes[g->n], g->graph, dep, dep ? 1 : 0, child);
  c->drv.cuGraphDestroy(child); /* the node holds its own copy */
  if (!cuda_check(c, d, rc, "cuGraphAddChildGraphNode", g->names[g->n])) return 0;
  g->fns[g->n] = NULL;
  g->blocks[g->n] = 0;
  g->n++;
  return 1;
}
