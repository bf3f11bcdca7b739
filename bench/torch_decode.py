#!/usr/bin/env python3
"""PyTorch side of the model benchmark: batch-1 decode and prefill of HF models with random bf16 weights.

No downloads: each model is built from a config written below, with random weights, on the GPU.
Modes (per config):
  eager       manual loop: prefill the prompt once into a transformers StaticCache, then gen_len
              single-token forward steps, greedy; only the decode steps are timed (CUDA events).
  compile     same loop, the decode step wrapped in torch.compile(mode="reduce-overhead",
              fullgraph=True) (CUDA graphs) and warmed up first; prefill also compiled.
  compile_prefill  only the compiled prefill (so that a run short of time can put every decode compile
              first: --modes compile --prefill-len 0, then --modes compile_prefill).
  hf_generate plain model.generate, eager, default (dynamic) cache, greedy, min_new_tokens =
              max_new_tokens; decode time = generate(prompt, gen_len) - generate(prompt, 1).
Each mode also measures the prefill of a prefill_len prompt (eager for eager, compiled for compile)
and the peak GPU memory. The floor is bytes of weights read per token / HBM bandwidth (4.13e12 B/s
by default): its inverse is the tok/s ceiling and "% floor" = measured tok/s / ceiling.
Usage:
    python3 bench/torch_decode.py [--configs qwen3-0.6b,llama-3.2-1b,qwen3-8b]
        [--modes eager,compile,hf_generate] [--prompt-len 128] [--gen-len 256] [--prefill-len 512]
        [--json OUT.json] [--budget-s S]
Each config runs in its own child process (a CUDA device-side assert poisons a process for good).
Runtime on the H200 here (2026-11-30, torch 2.11, transformers 5.17): HF eager is CPU-bound (~1.2 ms of
Python per layer per step), so eager + hf_generate for all three configs take ~4 min; torch.compile
takes 20-50 s per graph (decode and prefill are separate graphs). Split one long run with
--modes eager,hf_generate / --modes compile --prefill-len 0 / --modes compile_prefill, and --budget-s.
"""
import argparse, gc, inspect, json, statistics, sys, time, traceback

HBM_BW = 4.13e12  # B/s, H200 copy bandwidth as measured on the device (see bench/RESULTS.md context)

CONFIGS = {
    "qwen3-0.6b": ("qwen3", dict(
        hidden_size=1024, num_hidden_layers=28, num_attention_heads=16, num_key_value_heads=8, head_dim=128,
        intermediate_size=3072, vocab_size=151936, tie_word_embeddings=True, rope_theta=1000000.0,
        rms_norm_eps=1e-6, max_position_embeddings=40960)),
    "llama-3.2-1b": ("llama", dict(
        hidden_size=2048, num_hidden_layers=16, num_attention_heads=32, num_key_value_heads=8, head_dim=64,
        intermediate_size=8192, vocab_size=128256, tie_word_embeddings=True, rope_theta=500000.0,
        rope_scaling=dict(rope_type="llama3", factor=32.0, low_freq_factor=1.0, high_freq_factor=4.0,
                          original_max_position_embeddings=8192),
        rms_norm_eps=1e-5, max_position_embeddings=131072)),
    "qwen3-8b": ("qwen3", dict(
        hidden_size=4096, num_hidden_layers=36, num_attention_heads=32, num_key_value_heads=8, head_dim=128,
        intermediate_size=12288, vocab_size=151936, tie_word_embeddings=False, rope_theta=1000000.0,
        rms_norm_eps=1e-6, max_position_embeddings=40960)),
}


def log(*a):
    print(*a, flush=True)


def accepts(fn, name):
    try:
        return name in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False


def make_config(kind, params):
    import transformers
    cls = transformers.Qwen3Config if kind == "qwen3" else transformers.LlamaConfig
    p = dict(params)
    # transformers 5 folds rope_theta / rope_scaling into rope_parameters; older versions take them apart.
    if accepts(cls.__init__, "rope_parameters"):
        rp = dict(p.pop("rope_scaling", None) or {"rope_type": "default"})
        rp["rope_theta"] = p.pop("rope_theta")
        p["rope_parameters"] = rp
    cfg = cls(**p, initializer_range=0.02, bos_token_id=0, eos_token_id=1, pad_token_id=0)
    cfg._attn_implementation = "sdpa"
    return cfg


def build_model(kind, params):
    """Random bf16 weights, created and initialised on the GPU (CPU init of 8B would take minutes)."""
    import torch, transformers
    cfg = make_config(kind, params)
    cls = transformers.Qwen3ForCausalLM if kind == "qwen3" else transformers.LlamaForCausalLM
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16)
    try:
        with torch.device("cuda"):
            model = cls(cfg)
    finally:
        torch.set_default_dtype(old)
    model = model.to(device="cuda", dtype=torch.bfloat16).eval()
    if cfg.tie_word_embeddings and model.lm_head.weight.data_ptr() != model.model.embed_tokens.weight.data_ptr():
        model.lm_head.weight = model.model.embed_tokens.weight
    gen = torch.Generator(device="cuda").manual_seed(0)
    with torch.no_grad():
        for name, p in model.named_parameters():  # named_parameters lists a tied weight once
            if p.dim() >= 2:
                p.normal_(0.0, 0.02, generator=gen)
            else:
                p.fill_(1.0)  # norm weights
    return model


def weight_bytes(model):
    """(total parameter bytes, bytes read per decoded token). An untied input embedding is only
    gathered (one row per token), so it is left out of the per-token read."""
    total = sum(p.numel() * p.element_size() for p in model.parameters())
    emb = model.model.embed_tokens.weight
    tied = emb.data_ptr() == model.lm_head.weight.data_ptr()
    read = total if tied else total - emb.numel() * emb.element_size() + emb.shape[1] * emb.element_size()
    return total, read


def make_static_cache(model, max_len):
    import torch, inspect as _i
    from transformers import StaticCache
    sig = _i.signature(StaticCache.__init__).parameters
    kw = dict(config=model.config, max_cache_len=max_len)
    for k, v in (("max_batch_size", 1), ("batch_size", 1), ("device", "cuda"), ("dtype", torch.bfloat16)):
        if k in sig:
            kw[k] = v
    return StaticCache(**kw)


def mark_cache_static(cache):
    """CUDA graphs need the cache buffers at fixed addresses; transformers marks them when it allocates,
    this makes sure (harmless if already marked)."""
    import torch
    ts = []
    for layer in getattr(cache, "layers", []) or []:
        ts += [getattr(layer, "keys", None), getattr(layer, "values", None), getattr(layer, "cumulative_length", None)]
    ts += list(getattr(cache, "key_cache", []) or []) + list(getattr(cache, "value_cache", []) or [])
    for t in ts:
        if isinstance(t, torch.Tensor):
            try:
                torch._dynamo.mark_static_address(t)
            except Exception:
                pass


# Two distinct top-level functions so that torch.compile keeps separate graphs for prefill and decode.
# transformers >= 5.x dropped `cache_position` (the StaticCache keeps its own write offset, a tensor, so the cache
# must be reset() before each new sequence); older versions need it to know where to write.
def _prefill_fn(model, ids, pos, cache, cp):
    kw = dict(cache_position=pos) if cp else {}
    out = model(input_ids=ids, position_ids=pos.unsqueeze(0), past_key_values=cache, use_cache=True,
                logits_to_keep=1, **kw)
    return out.logits[:, -1].argmax(-1, keepdim=True)


def _decode_fn(model, tok, pos, cache, cp):
    kw = dict(cache_position=pos) if cp else {}
    out = model(input_ids=tok, position_ids=pos.unsqueeze(0), past_key_values=cache, use_cache=True,
                logits_to_keep=1, **kw)
    return out.logits[:, -1].argmax(-1, keepdim=True)


def takes_cache_position(model):
    return accepts(type(model).forward, "cache_position") and accepts(type(model.model).forward, "cache_position")


def reset_cache(cache):
    if hasattr(cache, "reset"):
        cache.reset()


class Timer:
    def __init__(self):
        import torch
        self.torch = torch
        self.a, self.b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

    def __enter__(self):
        self.torch.cuda.synchronize()
        self.t0 = time.perf_counter()
        self.a.record()
        return self

    def __exit__(self, *exc):
        self.b.record()
        self.torch.cuda.synchronize()
        self.wall_ms = (time.perf_counter() - self.t0) * 1e3
        self.ms = self.a.elapsed_time(self.b)


def run_loop(model, args, compiled):
    import torch
    P, G = args.prompt_len, args.gen_len
    gen = torch.Generator(device="cuda").manual_seed(1)
    ids = torch.randint(2, model.config.vocab_size, (1, P), device="cuda", generator=gen)
    prompt_pos = torch.arange(P, device="cuda")
    # one [1]-shaped tensor per step (not views of one arange) so compiled graphs see identical inputs
    dec_pos = [torch.full((1,), P + i, dtype=torch.long, device="cuda") for i in range(G)]
    cache = make_static_cache(model, P + G)
    res = {}

    cp = takes_cache_position(model)
    res["cache_position_arg"] = cp

    def mark():
        if compiled:
            torch.compiler.cudagraph_mark_step_begin()

    def one_pass(decode, steps=G):
        reset_cache(cache)
        tok = _prefill_fn(model, ids, prompt_pos, cache, cp)  # eager prefill (allocates the cache lazily)
        mark_cache_static(cache)
        toks = []
        with Timer() as t:
            for i in range(steps):
                mark()
                tok = decode(model, tok, dec_pos[i], cache, cp).clone()  # clone: a graph output is reused
                toks.append(tok)
        return t, torch.cat(toks, 1)

    decode = _decode_fn
    with torch.no_grad():
        if compiled:
            from torch._dynamo.utils import counters
            graphs0 = counters["stats"].get("unique_graphs", 0)
            tc = time.perf_counter()
            for fullgraph in (True, False):
                # dynamic=False: one graph per shape, no automatic-dynamic recompiles.
                decode = torch.compile(_decode_fn, mode="reduce-overhead", fullgraph=fullgraph, dynamic=False)
                try:
                    one_pass(decode)  # compile + CUDA-graph record + one full warm pass
                    res["fullgraph"] = fullgraph
                    break
                except Exception as e:
                    if not fullgraph:
                        raise
                    log(f"    fullgraph compile failed ({type(e).__name__}: {str(e)[:300]}); retrying with graph breaks")
                    res["fullgraph_error"] = f"{type(e).__name__}: {str(e)[:500]}"
                    torch._dynamo.reset()
            res["decode_compile_s"] = round(time.perf_counter() - tc, 2)
            res["decode_graphs"] = counters["stats"].get("unique_graphs", 0) - graphs0
            log(f"    decode compiled + warmed in {res['decode_compile_s']} s ({res['decode_graphs']} graphs)")
        else:
            one_pass(decode, min(G, 16))  # warm up (eager needs no long warm-up, and its steps are slow)
        runs = []
        for _ in range(args.repeats):
            t, toks = one_pass(decode)
            runs.append((t.ms, t.wall_ms))
        ms = statistics.median(r[0] for r in runs)
        res.update(decode_ms_total=round(ms, 3), decode_wall_ms_total=round(statistics.median(r[1] for r in runs), 3),
                   decode_ms_per_tok=round(ms / G, 4), decode_tok_s=round(G / ms * 1e3, 1),
                   decode_runs_ms=[round(r[0], 3) for r in runs], tokens_head=toks[0, :16].tolist())
    del cache
    return res


def run_prefill(model, args, compiled):
    import torch
    L = args.prefill_len
    gen = torch.Generator(device="cuda").manual_seed(2)
    ids = torch.randint(2, model.config.vocab_size, (1, L), device="cuda", generator=gen)
    pos = torch.arange(L, device="cuda")
    cache = make_static_cache(model, L)
    cp = takes_cache_position(model)
    res = {}

    def call(fn):
        reset_cache(cache)  # untimed: every prefill starts from an empty cache
        if compiled:
            torch.compiler.cudagraph_mark_step_begin()
        with Timer() as t:
            fn(model, ids, pos, cache, cp)
        return t.ms

    fn = _prefill_fn
    with torch.no_grad():
        call(fn)  # eager first: allocates the cache outside any compiled graph
        mark_cache_static(cache)
        if compiled:
            tc = time.perf_counter()
            for fullgraph in (True, False):
                fn = torch.compile(_prefill_fn, mode="reduce-overhead", fullgraph=fullgraph, dynamic=False)
                try:
                    for _ in range(3):  # compile, record, replay
                        call(fn)
                    res["prefill_fullgraph"] = fullgraph
                    break
                except Exception as e:
                    if not fullgraph:
                        raise
                    log(f"    fullgraph prefill compile failed ({type(e).__name__}: {str(e)[:300]}); with graph breaks")
                    torch._dynamo.reset()
            res["prefill_compile_s"] = round(time.perf_counter() - tc, 2)
            log(f"    prefill compiled + warmed in {res['prefill_compile_s']} s")
        else:
            call(fn)
        ts = [call(fn) for _ in range(args.prefill_iters)]
    ms = statistics.median(ts)
    res.update(prefill_len=L, prefill_ms=round(ms, 3), prefill_tok_s=round(L / ms * 1e3, 1))
    del cache
    return res


def run_hf_generate(model, args):
    import torch
    P, G = args.prompt_len, args.gen_len
    gen = torch.Generator(device="cuda").manual_seed(1)
    ids = torch.randint(2, model.config.vocab_size, (1, P), device="cuda", generator=gen)
    mask = torch.ones_like(ids)

    def generate(n):
        with Timer() as t:
            out = model.generate(ids, attention_mask=mask, max_new_tokens=n, min_new_tokens=n, do_sample=False,
                                 pad_token_id=0)
        assert out.shape[1] == P + n, f"generate returned {out.shape[1] - P} new tokens, wanted {n}"
        return t.ms, out

    with torch.no_grad():
        generate(8)  # warm up
        full, one = [], []
        for _ in range(args.repeats):
            ms, out = generate(G)
            full.append(ms)
            one.append(generate(1)[0])
    full_ms, one_ms = statistics.median(full), statistics.median(one)
    dec_ms = full_ms - one_ms  # G-1 decode steps
    return dict(generate_ms_total=round(full_ms, 3), generate_prefill_only_ms=round(one_ms, 3),
                decode_ms_total=round(dec_ms, 3), decode_ms_per_tok=round(dec_ms / (G - 1), 4),
                decode_tok_s=round((G - 1) / dec_ms * 1e3, 1), e2e_tok_s=round(G / full_ms * 1e3, 1),
                tokens_head=out[0, P:P + 16].tolist())


def free():
    import torch
    gc.collect()
    torch.cuda.synchronize()
    torch.cuda.empty_cache()


def run_mode(model, mode, args):
    import torch
    torch._dynamo.reset()
    free()
    torch.cuda.reset_peak_memory_stats()
    from torch._dynamo.utils import counters
    skips0 = counters["inductor"].get("cudagraph_skips", 0)
    t0 = time.perf_counter()
    if mode == "hf_generate":
        r = run_hf_generate(model, args)
    elif mode == "compile_prefill":
        r = run_prefill(model, args, True)
    else:
        compiled = mode == "compile"
        r = run_loop(model, args, compiled)
        if args.prefill_len > 0 and compiled and args.deadline and time.time() > args.deadline:
            r["prefill_skipped"] = "time budget spent before the compiled prefill"
            log("    compiled prefill skipped: time budget spent")
        elif args.prefill_len > 0:
            r.update(run_prefill(model, args, compiled))
    r["peak_mem_gib"] = round(torch.cuda.max_memory_allocated() / 2**30, 3)
    r["peak_reserved_gib"] = round(torch.cuda.max_memory_reserved() / 2**30, 3)
    r["mode_wall_s"] = round(time.perf_counter() - t0, 1)
    if mode.startswith("compile"):  # nonzero means some graph ran without CUDA graphs (see TORCH_LOGS=perf_hints)
        r["cudagraph_skips"] = counters["inductor"].get("cudagraph_skips", 0) - skips0
    torch._dynamo.reset()
    return r


def print_table(rows):
    hdr = (f"{'config':15} {'mode':15} {'tok/s':>8} {'ms/tok':>7} {'ceil tok/s':>10} {'%floor':>6} "
           f"{'prefill ms':>10} {'peak GiB':>8} {'compile s':>9}")
    log(hdr)
    log("-" * len(hdr))
    for r in rows:
        if "error" in r:
            log(f"{r['config']:15} {r['mode']:15} ERROR: {r['error'][:90]}")
            continue
        cs = (r.get("decode_compile_s") or 0) + (r.get("prefill_compile_s") or 0)
        pf = f"{r['prefill_ms']:10.2f}" if "prefill_ms" in r else f"{'-':>10}"
        if "decode_tok_s" in r:
            dec = f"{r['decode_tok_s']:8.1f} {r['decode_ms_per_tok']:7.3f} {r['floor_tok_s']:10.1f} {r['pct_floor']:6.1f}"
        else:
            dec = f"{'-':>8} {'-':>7} {r['floor_tok_s']:10.1f} {'-':>6}"
        log(f"{r['config']:15} {r['mode']:15} {dec} {pf} {r['peak_mem_gib']:8.2f} "
            f"{(f'{cs:9.1f}' if cs else f'{chr(45):>9}')}")


def bench_configs(configs, modes, args, deadline):
    """Runs in one process; returns (meta, rows). Rows are saved to args.json after each (config, mode)."""
    import torch, transformers
    meta = dict(device=torch.cuda.get_device_name(), torch=torch.__version__, transformers=transformers.__version__,
                hbm_bw=args.hbm_bw, prompt_len=args.prompt_len, gen_len=args.gen_len, prefill_len=args.prefill_len,
                repeats=args.repeats, batch=1, dtype="bfloat16", attn="sdpa")
    log(f"torch {torch.__version__}, transformers {transformers.__version__}, {meta['device']}")
    rows = []
    t_start = time.perf_counter()

    def save():
        if args.json:
            with open(args.json, "w") as f:
                json.dump(dict(meta, total_s=round(time.perf_counter() - t_start, 1), rows=rows), f, indent=1)

    for c in configs:
        if deadline and time.time() > deadline:
            rows += [dict(config=c, mode=m, error="skipped: time budget spent") for m in modes]
            save()
            continue
        kind, params = CONFIGS[c]
        model = None
        try:
            t0 = time.perf_counter()
            model = build_model(kind, params)
            total, read = weight_bytes(model)
            info = dict(params=sum(p.numel() for p in model.parameters()), weight_bytes=total,
                        weight_bytes_read_per_tok=read, floor_ms_per_tok=round(read / args.hbm_bw * 1e3, 4),
                        floor_tok_s=round(args.hbm_bw / read, 1),
                        attn_impl=getattr(model.config, "_attn_implementation", None),
                        rope=repr(getattr(model.config, "rope_parameters", None)
                                  or (getattr(model.config, "rope_theta", None),
                                      getattr(model.config, "rope_scaling", None))))
            log(f"[{c}] built in {time.perf_counter() - t0:.1f} s: {info['params'] / 1e9:.3f} B params, "
                f"{read / 1e9:.3f} GB read/token -> ceiling {info['floor_tok_s']} tok/s; "
                f"attn {info['attn_impl']}; rope {info['rope']}")
        except Exception as e:
            traceback.print_exc()
            rows.append(dict(config=c, mode="build", error=f"{type(e).__name__}: {e}"))
            save()
            del model
            free()
            continue
        for m in modes:
            row = dict(config=c, mode=m, **info)
            if deadline and time.time() > deadline:
                row["error"] = "skipped: time budget spent"
                rows.append(row)
                save()
                continue
            log(f"[{c}] {m} ...")
            try:
                row.update(run_mode(model, m, args))
                if "decode_tok_s" in row:
                    row["pct_floor"] = round(100.0 * row["decode_tok_s"] / info["floor_tok_s"], 1)
                log(f"[{c}] {m}: {row.get('decode_tok_s', '-')} tok/s ({row.get('pct_floor', '-')}% of floor), "
                    f"prefill {row.get('prefill_ms', '-')} ms, peak {row['peak_mem_gib']} GiB, {row['mode_wall_s']} s")
            except Exception as e:
                traceback.print_exc()
                row["error"] = f"{type(e).__name__}: {e}"
                try:
                    torch._dynamo.reset()
                except Exception:
                    pass
            rows.append(row)
            save()
            free()
        del model
        free()
    save()
    return meta, rows


def run_isolated(configs, args, argv, deadline, save):
    """One child process per config: a device-side assert or a crash poisons a CUDA context for good, and
    would otherwise lose the configs after it. The child's rows come back through its JSON file."""
    import os, subprocess, tempfile
    meta, rows = {}, []
    for c in configs:
        if deadline and time.time() > deadline:
            rows += [dict(config=c, mode=m, error="skipped: time budget spent") for m in args.modes.split(",") if m]
            continue
        if args.json:  # beside the output, so that a run killed mid-config still leaves the child's rows
            path = f"{args.json}.{c}.part.json"
        else:
            fd, path = tempfile.mkstemp(suffix=".json", prefix=f"torch_decode_{c}_")
            os.close(fd)
        cmd = [sys.executable, os.path.abspath(__file__), *argv, "--configs", c, "--json", path, "--child"]
        if deadline:
            cmd += ["--deadline", str(deadline)]
        rc = subprocess.run(cmd).returncode
        got = []
        try:
            with open(path) as f:
                d = json.load(f)
            got = d.pop("rows")
            d.pop("total_s", None)
            meta = meta or d
        except (OSError, ValueError):
            pass
        finally:
            if os.path.exists(path):
                os.unlink(path)
        done = {r["mode"] for r in got}
        if rc != 0:
            got += [dict(config=c, mode=m, error=f"child process exited with {rc} before this mode finished")
                    for m in args.modes.split(",") if m and m not in done]
        rows += got
        save(meta, rows)  # so a run cut short keeps the configs already done
    return meta, rows


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


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--configs", default=",".join(CONFIGS))
    ap.add_argument("--modes", default="eager,compile,hf_generate")
    ap.add_argument("--prompt-len", type=int, default=128)
    ap.add_argument("--gen-len", type=int, default=256)
    ap.add_argument("--prefill-len", type=int, default=512, help="0 skips the prefill measurement")
    ap.add_argument("--prefill-iters", type=int, default=10)
    ap.add_argument("--repeats", type=int, default=2, help="timed decode passes (median)")
    ap.add_argument("--hbm-bw", type=float, default=HBM_BW)
    ap.add_argument("--budget-s", type=float, default=0,
                    help="start no new (config, mode) after this many seconds (0: no limit)")
    ap.add_argument("--no-isolate", action="store_true", help="run every config in this process")
    ap.add_argument("--deadline", type=float, default=0, help=argparse.SUPPRESS)  # absolute time, for children
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--json")
    args = ap.parse_args()
    configs = [c for c in args.configs.split(",") if c]
    modes = [m for m in args.modes.split(",") if m]
    for c in configs:
        if c not in CONFIGS:
            ap.error(f"unknown config {c!r}; known: {', '.join(CONFIGS)}")
    for m in modes:
        if m not in ("eager", "compile", "compile_prefill", "hf_generate"):
            ap.error(f"unknown mode {m!r}")
    t_start = time.perf_counter()
    deadline = args.deadline = args.deadline or (time.time() + args.budget_s if args.budget_s > 0 else 0)

    def save(meta, rows):
        if args.json:
            with open(args.json, "w") as f:
                json.dump(dict(meta, total_s=round(time.perf_counter() - t_start, 1), rows=rows), f, indent=1)

    if args.child or args.no_isolate or len(configs) == 1:
        meta, rows = bench_configs(configs, modes, args, deadline)
    else:
        argv = strip_args(sys.argv[1:], {"--configs", "--json", "--budget-s", "--deadline", "--no-isolate", "--child"})
        meta, rows = run_isolated(configs, args, argv, deadline, save)
    if not args.child:  # the top-level process reports; children only write their JSON
        log(f"total {time.perf_counter() - t_start:.1f} s")
        print_table(rows)
        save(meta, rows)
    return 0 if rows and all("error" not in r for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
