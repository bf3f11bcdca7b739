#!/usr/bin/env python3
"""Single-op timings: lathe's compiled CUDA kernels beside PyTorch eager, same machine, same run.

Both sides are timed the same way: wall time of one call followed by a device synchronize, median
over N runs after warmup (so launch overhead is included on both sides). Usage:
    python3 bench/ops_vs_torch.py --lathe build/lathe [--iters 200] [--json out.json]
"""
import argparse, json, re, statistics, subprocess, sys, time

CASES = [
    # name, lathe program, torch builder (returns a zero-arg callable), bytes moved (for GB/s)
    ("rms_norm f32 [32,4096]", "x: f32[32,4096]; w: f32[4096]; y = rms_norm(x, w, 1e-6)",
     lambda t: (lambda x, w: (lambda: x * t.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w))(
         t.randn(32, 4096, device="cuda"), t.randn(4096, device="cuda")), 2 * 32 * 4096 * 4),
    ("softmax f32 [64,4096]", "x: f32[64,4096]; y = softmax(x, -1)",
     lambda t: (lambda x: (lambda: t.softmax(x, -1)))(t.randn(64, 4096, device="cuda")), 2 * 64 * 4096 * 4),
    ("layer_norm bf16 [32,4096]", "x: bf16[32,4096]; w: bf16[4096]; b: bf16[4096]; y = layer_norm(x, w, b, 1e-5)",
     lambda t: (lambda x, w, b: (lambda: t.nn.functional.layer_norm(x, (4096,), w, b, 1e-5)))(
         t.randn(32, 4096, device="cuda", dtype=t.bfloat16), t.randn(4096, device="cuda", dtype=t.bfloat16),
         t.randn(4096, device="cuda", dtype=t.bfloat16)), 2 * 32 * 4096 * 2),
    ("gemv bf16 [1,4096]x[4096,4096]", "x: bf16[1,4096]; w: bf16[4096,4096]; y = linear(x, w)",
     lambda t: (lambda x, w: (lambda: t.nn.functional.linear(x, w)))(
         t.randn(1, 4096, device="cuda", dtype=t.bfloat16), t.randn(4096, 4096, device="cuda", dtype=t.bfloat16)),
     4096 * 4096 * 2),
    ("gemv f32 [1,2048]x[8192,2048]", "x: f32[1,2048]; w: f32[8192,2048]; y = linear(x, w)",
     lambda t: (lambda x, w: (lambda: t.nn.functional.linear(x, w)))(
         t.randn(1, 2048, device="cuda"), t.randn(8192, 2048, device="cuda")), 8192 * 2048 * 4),
    ("silu*mul bf16 [1,14336]", "g: bf16[1,14336]; u: bf16[1,14336]; y = silu(g) * u",
     lambda t: (lambda g, u: (lambda: t.nn.functional.silu(g) * u))(
         t.randn(1, 14336, device="cuda", dtype=t.bfloat16), t.randn(1, 14336, device="cuda", dtype=t.bfloat16)),
     3 * 14336 * 2),
]


def time_torch(fn, iters, warmup):
    import torch
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(iters):
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        ts.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(ts)


def time_lathe(lathe, prog, iters, warmup):
    check = subprocess.run([lathe, "run", "-e", prog, "--target", "cuda", "--check"], capture_output=True, text=True)
    ok = check.returncode == 0
    r = subprocess.run([lathe, "run", "-e", prog, "--target", "cuda", "--bench", "--iters", str(iters),
                        "--warmup", str(warmup)], capture_output=True, text=True)
    m = re.search(r"(\d+) kernels?, median ([0-9.]+) ms", r.stdout)
    if not m:
        return None, None, ok, (r.stderr or r.stdout).strip()
    return float(m.group(2)), int(m.group(1)), ok, check.stdout.strip()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lathe", default="build/lathe")
    ap.add_argument("--iters", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--json")
    a = ap.parse_args()
    import torch
    rows = []
    for name, prog, build, nbytes in CASES:
        lat, nk, ok, info = time_lathe(a.lathe, prog, a.iters, a.warmup)
        tt = time_torch(build(torch), a.iters, a.warmup)
        rows.append(dict(name=name, lathe_ms=lat, kernels=nk, check_ok=ok, torch_ms=tt, bytes=nbytes, info=info))
    print(f"{'op':34} {'lathe ms':>9} {'kern':>4} {'check':>5} {'torch ms':>9} {'lathe GB/s':>10} {'speedup':>7}")
    for r in rows:
        lat = r["lathe_ms"]
        gbs = f"{r['bytes'] / lat / 1e6:10.1f}" if lat else f"{'-':>10}"
        sp = f"{r['torch_ms'] / lat:7.2f}" if lat else f"{'-':>7}"
        print(f"{r['name']:34} {lat if lat else float('nan'):9.4f} {r['kernels'] or 0:4d} {'ok' if r['check_ok'] else 'FAIL':>5} "
              f"{r['torch_ms']:9.4f} {gbs} {sp}")
        if not lat:
            print("   lathe:", r["info"][:300])
    if a.json:
        with open(a.json, "w") as f:
            json.dump(dict(device=torch.cuda.get_device_name(), torch=torch.__version__, rows=rows), f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
