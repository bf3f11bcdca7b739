#!/usr/bin/env python3
"""PyTorch reference for batched decode throughput (issue 16): a plain Llama / Qwen3 decoder written here.

No transformers, no downloads: the model is an nn.Module in this file with random weights (normal(0, 0.02)
matrices, norm weights 1), built directly on the device. Per layer: RMSNorm, one fused q/k/v Linear (no bias;
Qwen3 applies q_norm / k_norm, RMSNorms over head_dim, before RoPE), RoPE (rotate-half; llama3 frequency
scaling for Llama-3.2-1B), a static KV cache, SDPA, o_proj, residual, RMSNorm, one fused gate/up Linear,
SiLU(gate) * up, down, residual; then the final RMSNorm, lm_head (the embedding matrix when tied) and a greedy
argmax. The shapes come from bench/torch_decode.py's CONFIGS (qwen3-0.6b, llama-3.2-1b, qwen3-8b); tiny-llama
and tiny-qwen3 are small configs of the same two architectures for CPU runs and the self-test.

KV cache: one tensor [layers, 2, batch, kv_heads, max_len, head_dim] (max_len = prompt + gen), written at the
step's position (a [1] long tensor: every sequence is at the same position) with one index_put_ per layer on the
cache tensor itself: index_copy_ into the view cache[layer, 0] compiles (torch 2.15 inductor) into a copy of
the whole cache every step, the index_put_ into an in-place scatter (checked in TORCH_LOGS=output_code: no
cache-sized buffer, SDPA reads the cache argument directly). Decode attends
over the whole static cache with a boolean mask arange(max_len) <= pos, so the shapes never change and
torch.compile(fullgraph=True, dynamic=False) makes one graph for all steps. GQA without copying the cache: the
query heads that share a kv head are passed to SDPA as that kv head's query rows ([B, kv_heads, group, D]
against [B, kv_heads, max_len, D]). Prefill (positions 0..prompt-1) attends its own keys, causally.

Workload (issue 16): bf16, `batch` random prompts of prompt_len tokens, all starting together. The prompt is
prefilled in one forward (eager by default, --compile-prefill compiles it; timed separately, median of
--prefill-iters), then gen_len decode steps of the whole batch, the step compiled with
torch.compile(mode="reduce-overhead", fullgraph=True) (CUDA graphs) and warmed up (--warmup steps) first.
The decode is timed with CUDA events around the gen_len steps (median of --repeats passes, each after a fresh
prefill): tok/s = batch * gen_len / decode seconds; step ms = decode ms / gen_len.

Bandwidth bound (the issue's definition): bytes per step = every weight byte read once (an untied input
embedding is only gathered, batch rows of it; a tied one is read whole, as lm_head) + the KV cache read at the
mean context length of the gen_len steps, taken as prompt_len + gen_len / 2 (layers * 2 * batch * kv_heads *
ctx * head_dim * 2 bytes); tok/s bound = batch / (bytes / 4.13e12 B/s). This gives 25,689 / 91,960 (Llama-3.2-1B,
16 / 64 sequences) and 4,239 / 15,595 (Qwen3-8B) against the issue's 25,690 / 91,965 / 4,239 / 15,596: all
within 0.01 % (the self-test checks 1 %). Averaging the per-step context P + i + 1 (i = 0..G-1, mean P + G/2 +
1/2) instead gives 0.04 % less at 64 sequences, so the issue most likely used the midpoint too.
Note that this reference's SDPA reads the whole static cache (max_len, not ctx) every step; `bound_full_cache_tok_s`
in the JSON is the bound with that read.

Usage:
    python3 bench/torch_batched.py --configs llama-3.2-1b,qwen3-8b --batches 1,16,64 --prompt-len 128
        --gen-len 128 [--json OUT.json] [--budget-s S] [--device cuda]
    python3 bench/torch_batched.py --self-test [--device cpu] [--no-compile]   # float32 tiny configs on the CPU:
        ~10 s (~30 s the first time, while inductor compiles its C++; 2 s with --no-compile)
    python3 bench/torch_batched.py --configs tiny-llama --batches 1,4 --device cpu [--no-compile]
Each config runs in its own child process (a CUDA error poisons a process); the table is printed last, the full
results go to --json.
"""
import argparse, json, math, os, statistics, subprocess, sys, tempfile, time, traceback

import torch
import torch.nn as nn
import torch.nn.functional as F

HBM_BW = 4.13e12  # B/s, the H200 copy bandwidth the issue uses

# Issue 16's numbers: the measured reference tok/s and the bandwidth bound, by (config, batch).
ISSUE_TOK_S = {("llama-3.2-1b", 1): 792, ("llama-3.2-1b", 16): 11987, ("llama-3.2-1b", 64): 41077,
               ("qwen3-8b", 1): 194, ("qwen3-8b", 16): 2872, ("qwen3-8b", 64): 10109}
ISSUE_BOUND = {("llama-3.2-1b", 16): 25690, ("llama-3.2-1b", 64): 91965,
               ("qwen3-8b", 16): 4239, ("qwen3-8b", 64): 15596}


def log(*a):
    print(*a, flush=True)


def spec_from_hf(kind, p):
    return dict(kind=kind, hidden=p["hidden_size"], layers=p["num_hidden_layers"], heads=p["num_attention_heads"],
                kv_heads=p["num_key_value_heads"], head_dim=p["head_dim"], inter=p["intermediate_size"],
                vocab=p["vocab_size"], tied=p["tie_word_embeddings"], theta=p["rope_theta"],
                rope_scaling=p.get("rope_scaling"), eps=p["rms_norm_eps"], qk_norm=kind == "qwen3")


def load_configs():
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    sys.dont_write_bytecode = True  # no bench/__pycache__ in the work tree
    from torch_decode import CONFIGS as HF_CONFIGS  # one source for the shapes of both benchmarks
    cfgs = {name: spec_from_hf(kind, p) for name, (kind, p) in HF_CONFIGS.items()}
    # Small configs of the same architectures; the llama3 scaling's original length is small so that its three
    # frequency bands all occur at head_dim 16.
    cfgs["tiny-llama"] = dict(kind="llama", hidden=64, layers=2, heads=4, kv_heads=2, head_dim=16, inter=128,
                              vocab=256, tied=True, theta=500000.0, eps=1e-5, qk_norm=False,
                              rope_scaling=dict(rope_type="llama3", factor=32.0, low_freq_factor=1.0,
                                                high_freq_factor=4.0, original_max_position_embeddings=64))
    cfgs["tiny-qwen3"] = dict(kind="qwen3", hidden=64, layers=2, heads=4, kv_heads=1, head_dim=32, inter=96,
                              vocab=256, tied=False, theta=1000000.0, eps=1e-6, qk_norm=True, rope_scaling=None)
    return cfgs


# ---------------------------------------------------------------------------------------------------- bytes

def weight_bytes(s, elt=2):
    """(all parameter bytes, bytes of them read per decode step excluding the input embedding's gather)."""
    h, D, I = s["hidden"], s["head_dim"], s["inter"]
    q, kv = s["heads"] * D, s["kv_heads"] * D
    layer = h * (q + 2 * kv) + q * h + h * 2 * I + I * h + 2 * h + (2 * D if s["qk_norm"] else 0)
    table = s["vocab"] * h
    total = s["layers"] * layer + h + table + (0 if s["tied"] else table)
    read = total if s["tied"] else total - table  # an untied table is only gathered: see step_bytes
    return total * elt, read * elt


def kv_bytes(s, batch, ctx, elt=2):
    return s["layers"] * 2 * batch * s["kv_heads"] * ctx * s["head_dim"] * elt


def step_bytes(s, batch, ctx, elt=2):
    _, read = weight_bytes(s, elt)
    gather = 0 if s["tied"] else batch * s["hidden"] * elt
    return read + gather + kv_bytes(s, batch, ctx, elt)


def bound_tok_s(s, batch, prompt_len, gen_len, bw=HBM_BW, ctx=None):
    ctx = prompt_len + gen_len / 2 if ctx is None else ctx
    return batch / (step_bytes(s, batch, ctx) / bw)


# ---------------------------------------------------------------------------------------------------- model

class RMSNorm(nn.Module):
    def __init__(self, n, eps):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(n))

    def forward(self, x):
        xf = x.float()
        xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * xf.to(x.dtype)


def rope_inv_freq(s):
    D = s["head_dim"]
    inv = 1.0 / (s["theta"] ** (torch.arange(0, D, 2, dtype=torch.float64) / D))
    rs = s.get("rope_scaling")
    if rs:
        if rs.get("rope_type") != "llama3":
            raise ValueError(f"rope scaling {rs!r} not supported (llama3 only)")
        factor, lo, hi = rs["factor"], rs["low_freq_factor"], rs["high_freq_factor"]
        orig = rs["original_max_position_embeddings"]
        wavelen = 2 * math.pi / inv
        lo_wavelen, hi_wavelen = orig / lo, orig / hi
        smooth = (orig / wavelen - lo) / (hi - lo)
        scaled = torch.where(wavelen > lo_wavelen, inv / factor, inv)  # long waves slowed, short ones kept
        mid = (wavelen <= lo_wavelen) & (wavelen >= hi_wavelen)
        inv = torch.where(mid, (1 - smooth) * inv / factor + smooth * inv, scaled)
    return inv.float()


def apply_rope(x, cos, sin):
    """x [B, n, S, D]; cos, sin [S, D] (the half-frequencies repeated, rotate-half layout)."""
    d = x.shape[-1] // 2
    rot = torch.cat((-x[..., d:], x[..., :d]), -1)
    return x * cos + rot * sin


def write_kv(cache, layer, k, v, pos):
    """cache[layer, 0/1, :, :, pos] = k/v, as one index_put_ on the cache itself. (index_copy_ into the view
    cache[layer, 0] is the obvious way, but inductor turns a mutated view of a graph input into a copy of the
    whole cache per step; an index_put_ on the base is done in place.)"""
    B, KV, S, _ = k.shape
    dev = k.device
    idx = (torch.full((1, 1, 1, 1), layer, dtype=torch.long, device=dev),
           torch.arange(2, device=dev).view(2, 1, 1, 1), torch.arange(B, device=dev).view(1, B, 1, 1),
           torch.arange(KV, device=dev).view(1, 1, KV, 1), pos.view(1, 1, 1, S))
    cache.index_put_(idx, torch.stack((k, v)))


class Block(nn.Module):
    def __init__(self, s, index):
        super().__init__()
        self.index = index
        h, D, self.H, self.KV = s["hidden"], s["head_dim"], s["heads"], s["kv_heads"]
        self.D = D
        self.attn_norm = RMSNorm(h, s["eps"])
        self.qkv = nn.Linear(h, (self.H + 2 * self.KV) * D, bias=False)
        self.q_norm = RMSNorm(D, s["eps"]) if s["qk_norm"] else None
        self.k_norm = RMSNorm(D, s["eps"]) if s["qk_norm"] else None
        self.o_proj = nn.Linear(self.H * D, h, bias=False)
        self.mlp_norm = RMSNorm(h, s["eps"])
        self.gate_up = nn.Linear(h, 2 * s["inter"], bias=False)
        self.down = nn.Linear(s["inter"], h, bias=False)

    def forward(self, x, cos, sin, cache, pos, mask):
        """x [B, S, h]; cache [layers, 2, B, KV, max_len, D]; pos [S]; mask None (prefill from 0) or
        [1, 1, 1, max_len] bool (decode, S == 1)."""
        B, S, _ = x.shape
        H, KV, D = self.H, self.KV, self.D
        q, k, v = self.qkv(self.attn_norm(x)).split([H * D, KV * D, KV * D], -1)
        q, k, v = q.view(B, S, H, D), k.view(B, S, KV, D), v.view(B, S, KV, D)
        if self.q_norm is not None:
            q, k = self.q_norm(q), self.k_norm(k)
        q = apply_rope(q.transpose(1, 2), cos, sin)
        k = apply_rope(k.transpose(1, 2), cos, sin)
        v = v.transpose(1, 2)
        write_kv(cache, self.index, k, v, pos)
        kc, vc = cache[self.index, 0], cache[self.index, 1]
        G = H // KV
        if mask is None:
            o = F.scaled_dot_product_attention(q, k.repeat_interleave(G, 1), v.repeat_interleave(G, 1),
                                               is_causal=True)  # [B, H, S, D]
            o = o.transpose(1, 2).reshape(B, S, H * D)
        else:
            assert S == 1, "decode takes one token per sequence"
            # query head h uses kv head h // G: the G heads of a kv head become its G query rows
            o = F.scaled_dot_product_attention(q.reshape(B, KV, G, D), kc, vc, attn_mask=mask)  # [B, KV, G, D]
            o = o.reshape(B, 1, H * D)
        x = x + self.o_proj(o)
        gate, up = self.gate_up(self.mlp_norm(x)).chunk(2, -1)
        return x + self.down(F.silu(gate) * up)


class Decoder(nn.Module):
    def __init__(self, s):
        super().__init__()
        self.embed = nn.Embedding(s["vocab"], s["hidden"])
        self.layers = nn.ModuleList(Block(s, i) for i in range(s["layers"]))
        self.norm = RMSNorm(s["hidden"], s["eps"])
        self.lm_head = None if s["tied"] else nn.Linear(s["hidden"], s["vocab"], bias=False)

    def forward(self, ids, pos, cache, decode):
        """ids [B, S] (S == 1 for decode), pos [S] long, cache [layers, 2, B, KV, max_len, D].
        Returns the greedy next token of each sequence, [B]."""
        x = self.embed(ids)
        f = pos.float()[:, None] * self.inv_freq[None]
        emb = torch.cat((f, f), -1)
        cos, sin = emb.cos().to(x.dtype), emb.sin().to(x.dtype)
        mask = (torch.arange(cache.shape[4], device=ids.device) <= pos).view(1, 1, 1, -1) if decode else None
        for layer in self.layers:
            x = layer(x, cos, sin, cache, pos, mask)
        x = self.norm(x[:, -1])
        w = self.embed.weight if self.lm_head is None else self.lm_head.weight
        return F.linear(x, w).argmax(-1)


def build_model(s, device, dtype, seed=0, std=0.02):
    old = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        with torch.device(device):
            model = Decoder(s)
    finally:
        torch.set_default_dtype(old)
    model.register_buffer("inv_freq", rope_inv_freq(s).to(device), persistent=False)  # float32 always
    gen = torch.Generator(device=device).manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() >= 2:
                p.normal_(0.0, std, generator=gen)
            else:
                p.fill_(1.0)
    return model.eval()


def new_cache(s, batch, max_len, device, dtype):
    cache = torch.zeros(s["layers"], 2, batch, s["kv_heads"], max_len, s["head_dim"], dtype=dtype, device=device)
    torch._dynamo.mark_static_address(cache)  # CUDA graphs: fixed address, mutated in place
    return cache


# Two top-level functions, so that torch.compile keeps separate graphs for prefill and decode.
def prefill_step(model, ids, pos, cache):
    return model(ids, pos, cache, False)


def decode_step(model, tok, pos, cache):
    return model(tok.view(-1, 1), pos, cache, True)


def compile_fn(fn, fullgraph=True):
    # dynamic=False: one graph per shape (batch), no automatic-dynamic recompiles.
    return torch.compile(fn, mode="reduce-overhead", fullgraph=fullgraph, dynamic=False)


def mark_step(device):
    if torch.device(device).type == "cuda":
        torch.compiler.cudagraph_mark_step_begin()


class Timer:
    def __init__(self, device):
        self.cuda = torch.device(device).type == "cuda"
        if self.cuda:
            self.a, self.b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

    def sync(self):
        if self.cuda:
            torch.cuda.synchronize()

    def __enter__(self):
        self.sync()
        self.t0 = time.perf_counter()
        if self.cuda:
            self.a.record()
        return self

    def __exit__(self, *exc):
        if self.cuda:
            self.b.record()
        self.sync()
        self.wall_ms = (time.perf_counter() - self.t0) * 1e3
        self.ms = self.a.elapsed_time(self.b) if self.cuda else self.wall_ms


def generate(model, cache, ids, prefill, decode, steps, device):
    """Prefill ids [B, P] from position 0, then `steps` decode steps; returns tokens [B, steps + 1] (the first
    from the prefill) and the decode Timer."""
    P = ids.shape[1]
    pos = torch.arange(P, device=device)
    dec_pos = [torch.full((1,), P + i, dtype=torch.long, device=device) for i in range(steps)]
    mark_step(device)
    tok = prefill(model, ids, pos, cache).clone()
    toks = [tok]
    with Timer(device) as t:
        for i in range(steps):
            mark_step(device)
            tok = decode(model, tok, dec_pos[i], cache).clone()  # clone: a CUDA-graph output buffer is reused
            toks.append(tok)
    return torch.stack(toks, 1), t


def graph_count():
    from torch._dynamo.utils import counters
    return counters["stats"].get("unique_graphs", 0)


def cudagraph_skips():
    from torch._dynamo.utils import counters
    return counters["inductor"].get("cudagraph_skips", 0)


def run_batch(model, s, batch, args):
    dev, dtype = args.device, DTYPES[args.dtype]
    P, G = args.prompt_len, args.gen_len
    cache = new_cache(s, batch, P + G, dev, dtype)
    gen = torch.Generator(device=dev).manual_seed(1000 + batch)
    ids = torch.randint(0, s["vocab"], (batch, P), device=dev, generator=gen)
    pos = torch.arange(P, device=dev)
    res = dict(batch=batch)
    torch._dynamo.reset()
    skips0 = cudagraph_skips()

    prefill = prefill_step
    with torch.no_grad():
        if args.compile_prefill and not args.no_compile:
            tc = time.perf_counter()
            prefill = compile_fn(prefill_step)
            for _ in range(3):  # compile, record, replay
                mark_step(dev)
                prefill(model, ids, pos, cache)
            res["prefill_compile_s"] = round(time.perf_counter() - tc, 2)
        else:
            prefill(model, ids, pos, cache)  # warm up (cuBLAS handles, allocator)
        pts = []
        for _ in range(args.prefill_iters):
            mark_step(dev)
            with Timer(dev) as t:
                prefill(model, ids, pos, cache)
            pts.append(t.ms)
        res.update(prefill_ms=round(statistics.median(pts), 3),
                   prefill_tok_s=round(batch * P / statistics.median(pts) * 1e3, 1),
                   prefill_compiled=prefill is not prefill_step)
        log(f"    prefill {batch} x {P}: {res['prefill_ms']} ms ({res['prefill_tok_s']} tok/s)")

        decode = decode_step
        if not args.no_compile:
            g0 = graph_count()
            tc = time.perf_counter()
            for fullgraph in (True, False):
                decode = compile_fn(decode_step, fullgraph)
                try:
                    generate(model, cache, ids, prefill, decode, min(args.warmup, G), dev)  # compile, record
                    res["fullgraph"] = fullgraph
                    break
                except Exception as e:
                    if not fullgraph:
                        raise
                    log(f"    WARNING: fullgraph compile failed ({type(e).__name__}: {str(e)[:300]}); "
                        "retrying with graph breaks (this is not the reference configuration)")
                    res["fullgraph_error"] = f"{type(e).__name__}: {str(e)[:500]}"
                    torch._dynamo.reset()
            res["decode_compile_s"] = round(time.perf_counter() - tc, 2)
            log(f"    decode compiled + warmed ({args.warmup} steps) in {res['decode_compile_s']} s")
        else:
            generate(model, cache, ids, prefill, decode, min(args.warmup, G), dev)
        runs = []
        for _ in range(args.repeats):
            toks, t = generate(model, cache, ids, prefill, decode, G, dev)
            runs.append((t.ms, t.wall_ms))
        if not args.no_compile:
            res["decode_graphs"] = graph_count() - g0  # 1 when no step recompiled
            res["cudagraph_skips"] = cudagraph_skips() - skips0  # nonzero: some graph ran without CUDA graphs
            if res["cudagraph_skips"] and torch.device(dev).type == "cuda":
                log(f"    WARNING: {res['cudagraph_skips']} graph(s) ran without CUDA graphs (TORCH_LOGS=perf_hints)")
    ms = statistics.median(r[0] for r in runs)
    bound = bound_tok_s(s, batch, P, G, args.hbm_bw)
    tok_s = batch * G / ms * 1e3
    res.update(decode_ms_total=round(ms, 3), decode_wall_ms_total=round(statistics.median(r[1] for r in runs), 3),
               decode_runs_ms=[round(r[0], 3) for r in runs], step_ms=round(ms / G, 4), tok_s=round(tok_s, 1),
               bound_tok_s=round(bound, 1), pct_bound=round(100 * tok_s / bound, 1),
               bound_full_cache_tok_s=round(bound_tok_s(s, batch, P, G, args.hbm_bw, ctx=P + G), 1),
               step_bytes=step_bytes(s, batch, P + G / 2), tokens_row0_head=toks[0, :16].tolist())
    del cache
    return res


DTYPES = {"bfloat16": torch.bfloat16, "float32": torch.float32, "float16": torch.float16}


def free(device):
    import gc
    gc.collect()
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()
        torch.cuda.empty_cache()


def bench_config(name, s, batches, args, save):
    dev = args.device
    if torch.device(dev).type == "cuda" and not torch.cuda.is_available():
        raise SystemExit("torch.cuda.is_available() is False; pass --device cpu to run on the CPU")
    meta = dict(device=torch.cuda.get_device_name() if torch.device(dev).type == "cuda" else "cpu",
                torch=torch.__version__, hbm_bw=args.hbm_bw, prompt_len=args.prompt_len, gen_len=args.gen_len,
                dtype=args.dtype, compiled=not args.no_compile, warmup=args.warmup, repeats=args.repeats)
    log(f"[{name}] torch {torch.__version__} on {meta['device']}")
    rows = []
    t0 = time.perf_counter()
    model = build_model(s, dev, DTYPES[args.dtype])
    total, read = weight_bytes(s, torch.finfo(DTYPES[args.dtype]).bits // 8)
    actual = sum(p.numel() * p.element_size() for p in model.parameters())
    assert actual == total, f"weight bytes: built {actual}, computed {total}"
    log(f"[{name}] built in {time.perf_counter() - t0:.1f} s: {total / 2**30:.2f} GiB of weights, "
        f"{read / 1e9:.3f} GB read per step")
    info = dict(config=name, weight_bytes=total, weight_bytes_read_per_step=read)
    for b in batches:
        row = dict(info, batch=b)
        issue = ISSUE_TOK_S.get((name, b))
        if issue:
            row["issue_tok_s"] = issue
        if args.deadline and time.time() > args.deadline:
            row["error"] = "skipped: time budget spent"
            rows.append(row)
            save(meta, rows)
            continue
        log(f"[{name}] batch {b} ...")
        t1 = time.perf_counter()
        try:
            if torch.device(dev).type == "cuda":
                torch.cuda.reset_peak_memory_stats()
            row.update(run_batch(model, s, b, args))
            if torch.device(dev).type == "cuda":
                row["peak_mem_gib"] = round(torch.cuda.max_memory_allocated() / 2**30, 3)
            row["wall_s"] = round(time.perf_counter() - t1, 1)
            log(f"[{name}] batch {b}: {row['tok_s']} tok/s, {row['step_ms']} ms/step, {row['pct_bound']}% of "
                f"bound {row['bound_tok_s']}" + (f" (issue: {issue} tok/s)" if issue else "") +
                f", prefill {row['prefill_ms']} ms, {row['wall_s']} s")
        except Exception as e:
            traceback.print_exc()
            row["error"] = f"{type(e).__name__}: {str(e)[:500]}"
        rows.append(row)
        save(meta, rows)
        torch._dynamo.reset()
        free(dev)
    return meta, rows


def print_table(rows):
    hdr = (f"{'config':13} {'batch':>5} {'tok/s':>9} {'step ms':>8} {'bound':>9} {'%bound':>6} {'issue':>7} "
           f"{'prefill ms':>10} {'compile s':>9}")
    log(hdr)
    log("-" * len(hdr))
    for r in rows:
        if "error" in r:
            log(f"{r['config']:13} {r.get('batch', '-'):>5} ERROR: {r['error'][:90]}")
            continue
        issue = f"{r['issue_tok_s']:7d}" if "issue_tok_s" in r else f"{'-':>7}"
        cs = (r.get("decode_compile_s") or 0) + (r.get("prefill_compile_s") or 0)
        log(f"{r['config']:13} {r['batch']:5d} {r['tok_s']:9.1f} {r['step_ms']:8.3f} {r['bound_tok_s']:9.1f} "
            f"{r['pct_bound']:6.1f} {issue} {r['prefill_ms']:10.2f} " + (f"{cs:9.1f}" if cs else f"{'-':>9}"))


def strip_args(argv, names):
    """argv without the given options (and their values), so a child can be given its own."""
    out, skip = [], False
    for a in argv:
        if skip:
            skip = False
            continue
        key = a.split("=", 1)[0]
        if key in names:
            skip = "=" not in a
            continue
        out.append(a)
    return out


def run_isolated(configs, batches, args, save):
    meta, rows = {}, []
    argv = strip_args(sys.argv[1:], {"--configs", "--json", "--budget-s", "--deadline", "--no-isolate", "--child"})
    for c in configs:
        if args.deadline and time.time() > args.deadline:
            rows += [dict(config=c, batch=b, error="skipped: time budget spent") for b in batches]
            continue
        if args.json:  # beside the output, so a run killed mid-config keeps the child's rows
            path = f"{args.json}.{c}.part.json"
        else:
            fd, path = tempfile.mkstemp(suffix=".json", prefix=f"torch_batched_{c}_")
            os.close(fd)
        cmd = [sys.executable, os.path.abspath(__file__), *argv, "--configs", c, "--json", path, "--child"]
        if args.deadline:
            cmd += ["--deadline", str(args.deadline)]
        rc = subprocess.run(cmd).returncode
        got = []
        try:
            with open(path) as f:
                d = json.load(f)
            got = d.pop("rows")
            meta = meta or d
        except (OSError, ValueError):
            pass
        finally:
            if os.path.exists(path):
                os.unlink(path)
        done = {r["batch"] for r in got}
        if rc != 0:
            got += [dict(config=c, batch=b, error=f"child process exited with {rc} before this batch finished")
                    for b in batches if b not in done]
        rows += got
        save(meta, rows)
    return meta, rows


# ---------------------------------------------------------------------------------------------------- self-test

def self_test(args, cfgs):
    """Float32 tiny configs: the compiled batched decode equals an eager batch-1 cached decode of each checked
    row, and both equal a cache-free recompute of the whole sequence each step; the bound reproduces the issue."""
    t0 = time.perf_counter()
    fails = []

    def check(ok, what):
        log(("ok   " if ok else "FAIL ") + what)
        if not ok:
            fails.append(what)

    for (c, b), want in ISSUE_BOUND.items():
        got = bound_tok_s(cfgs[c], b, 128, 128)
        check(abs(got / want - 1) < 0.01, f"bound {c} batch {b}: {got:.0f} tok/s, issue {want} "
              f"({100 * (got / want - 1):+.3f} %)")
    inv = rope_inv_freq(cfgs["tiny-llama"]).double()
    plain = rope_inv_freq(dict(cfgs["tiny-llama"], rope_scaling=None)).double()
    wl = 2 * math.pi / plain
    check(bool(torch.allclose(inv[wl < 16], plain[wl < 16]) and torch.allclose(inv[wl > 64], plain[wl > 64] / 32)
               and ((wl >= 16) & (wl <= 64)).any() and (wl < 16).any() and (wl > 64).any()),
          "llama3 rope scaling: short waves kept, long ones / factor, a band between")

    dev, B, P, G = args.device, 3, 7, 6
    for name in ("tiny-llama", "tiny-qwen3"):
        s = cfgs[name]
        # std 0.2: the layers outweigh the embedding, so the tokens depend on attention and the cache
        model = build_model(s, dev, torch.float32, seed=5, std=0.2)
        total, _ = weight_bytes(s, 4)
        check(total == sum(p.numel() * 4 for p in model.parameters()), f"{name}: weight bytes formula")
        ids = torch.randint(0, s["vocab"], (B, P), device=dev, generator=torch.Generator(device=dev).manual_seed(9))
        torch._dynamo.reset()
        g0 = graph_count()
        with torch.no_grad():
            decode = decode_step if args.no_compile else compile_fn(decode_step)
            cache = new_cache(s, B, P + G, dev, torch.float32)
            generate(model, cache, ids, prefill_step, decode, 2, dev)  # warm-up pass, leaves stale cache rows
            batched, _ = generate(model, cache, ids, prefill_step, decode, G, dev)
            if not args.no_compile:
                check(graph_count() - g0 == 1, f"{name}: one compiled decode graph for all positions "
                      f"({graph_count() - g0})")
            for r in (0, B - 1):
                one, _ = generate(model, new_cache(s, 1, P + G, dev, torch.float32), ids[r:r + 1], prefill_step,
                                  decode_step, G, dev)
                seq = ids[r:r + 1]
                for _ in range(G + 1):  # no cache: every step prefills the whole sequence so far
                    nxt = prefill_step(model, seq, torch.arange(seq.shape[1], device=dev),
                                       new_cache(s, 1, seq.shape[1], dev, torch.float32))
                    seq = torch.cat((seq, nxt.view(1, 1)), 1)
                ref = seq[0, P:]
                check(batched[r].tolist() == one[0].tolist(), f"{name}: row {r} of the "
                      f"{'eager' if args.no_compile else 'compiled'} batch-{B} decode == eager batch-1 decode "
                      f"{batched[r].tolist()}")
                check(one[0].tolist() == ref.tolist(), f"{name}: row {r} cached decode == cache-free recompute "
                      f"{ref.tolist()}")
            check(len({tuple(batched[r].tolist()) for r in range(B)}) > 1, f"{name}: the rows differ")
    log(f"self-test: {len(fails)} failed, {time.perf_counter() - t0:.1f} s")
    return 1 if fails else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--configs", default="llama-3.2-1b,qwen3-8b")
    ap.add_argument("--batches", default="1,16,64")
    ap.add_argument("--prompt-len", type=int, default=128)
    ap.add_argument("--gen-len", type=int, default=128)
    ap.add_argument("--device", help="torch device (default: cuda; cpu for --self-test)")
    ap.add_argument("--dtype", default="bfloat16", choices=sorted(DTYPES))
    ap.add_argument("--warmup", type=int, default=5, help="decode steps run (compile + CUDA-graph record) first")
    ap.add_argument("--repeats", type=int, default=3, help="timed decode passes (median)")
    ap.add_argument("--prefill-iters", type=int, default=3, help="timed prefills (median)")
    ap.add_argument("--compile-prefill", action="store_true", help="compile the prefill too (default eager)")
    ap.add_argument("--no-compile", action="store_true", help="eager decode (for CPUs where compiling is slow)")
    ap.add_argument("--hbm-bw", type=float, default=HBM_BW)
    ap.add_argument("--budget-s", type=float, default=0, help="start no new batch after this many seconds")
    ap.add_argument("--no-isolate", action="store_true", help="run every config in this process")
    ap.add_argument("--self-test", action="store_true", help="float32 tiny-config correctness checks (CPU: seconds)")
    ap.add_argument("--deadline", type=float, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--json")
    args = ap.parse_args()
    cfgs = load_configs()
    if args.self_test:
        args.device = args.device or "cpu"
        return self_test(args, cfgs)
    args.device = args.device or "cuda"
    configs = [c for c in args.configs.split(",") if c]
    for c in configs:
        if c not in cfgs:
            ap.error(f"unknown config {c!r}; known: {', '.join(cfgs)}")
    try:
        batches = [int(b) for b in args.batches.split(",") if b]
    except ValueError:
        ap.error(f"--batches wants comma-separated integers, got {args.batches!r}")
    if not batches or min(batches) < 1 or args.prompt_len < 1 or args.gen_len < 1:
        ap.error("batches, --prompt-len and --gen-len must be positive")
    t_start = time.perf_counter()
    args.deadline = args.deadline or (time.time() + args.budget_s if args.budget_s > 0 else 0)

    def save(meta, rows):
        if args.json:
            with open(args.json, "w") as f:
                json.dump(dict(meta, total_s=round(time.perf_counter() - t_start, 1), rows=rows), f, indent=1)

    if args.child or args.no_isolate or len(configs) == 1:
        meta, rows = {}, []
        for c in configs:
            m, r = bench_config(c, cfgs[c], batches, args, lambda m_, r_: save(m_, rows + r_))
            meta, rows = meta or m, rows + r
    else:
        meta, rows = run_isolated(configs, batches, args, save)
    if not args.child:
        log(f"total {time.perf_counter() - t_start:.1f} s")
        print_table(rows)
    save(meta, rows)
    return 0 if rows and all("error" not in r for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
