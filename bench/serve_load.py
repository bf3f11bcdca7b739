#!/usr/bin/env python3
"""A load generator for `lathe serve` (or any OpenAI-compatible server), as vLLM's benchmark_serving does with
its random dataset: N concurrent streaming clients (a closed loop: each sends its next request when the last one
ends) send completions whose prompts are random token ids (lengths drawn uniformly from --prompt-len MIN:MAX)
and whose outputs are --output-len MIN:MAX tokens (ignore_eos, so the lengths are exact), until --requests have
been sent or, with --duration, until that many seconds have passed (the requests in flight then finish).
Reports output tokens/s, requests/s, time to first token (TTFT), inter-token latency (ITL: between successive
streamed chunks that carry tokens) and end-to-end latency, p50 and p99 each, and the errors: HTTP errors, error
events, streams without [DONE], and answers whose usage is not exactly their max_tokens (a lost or truncated
response). A chunk carries tokens when its choice has no finish_reason (a model without a tokenizer, served with
--random-weights, streams chunks with empty text). The clients run in --procs processes (threads within each),
so Python's interpreter lock does not limit the rate it can read. Standard library only.

    python3 bench/serve_load.py --port 8000 --clients 16 --requests 64 --prompt-len 128:512 --output-len 64:128
    python3 bench/serve_load.py ... --duration 30 --json out.json   # for 30 s; the summary also as JSON
"""
import argparse
import http.client
import json
import multiprocessing
import os
import random
import sys
import threading
import time


def span(s):
    lo, _, hi = s.partition(":")
    lo, hi = int(lo), int(hi or lo)
    if lo < 1 or hi < lo:
        raise argparse.ArgumentTypeError("expected MIN:MAX with 1 <= MIN <= MAX, got %r" % s)
    return lo, hi


def percentile(xs, p):
    if not xs:
        return None
    xs = sorted(xs)
    k = (len(xs) - 1) * p / 100.0
    i = int(k)
    return xs[i] + (xs[min(i + 1, len(xs) - 1)] - xs[i]) * (k - i)


def one_request(a, prompt, n):
    """Sends one streaming completion; returns a record of its timings and tokens (or its error)."""
    body = {"prompt": prompt, "max_tokens": n, "stream": True, "stream_options": {"include_usage": True},
            "temperature": a.temperature, "ignore_eos": True}
    if a.model:
        body["model"] = a.model
    headers = {"Content-Type": "application/json"}
    if a.api_key:
        headers["Authorization"] = "Bearer " + a.api_key
    rec = {"prompt_tokens": len(prompt), "max_tokens": n, "error": None, "ttft": None, "itl": [], "tokens": 0}
    t0 = time.perf_counter()
    conn = http.client.HTTPConnection(a.host, a.port, timeout=a.timeout)
    try:
        conn.request("POST", "/v1/completions", json.dumps(body), headers)
        r = conn.getresponse()
        if r.status != 200:
            rec["error"] = "HTTP %d: %s" % (r.status, r.read()[:200].decode(errors="replace"))
            return rec
        last, done = None, False
        while True:
            line = r.readline()
            if not line:
                break
            line = line.strip()
            if not line.startswith(b"data: "):
                continue
            data = line[6:]
            if data == b"[DONE]":
                done = True
                break
            j = json.loads(data)
            if "error" in j:
                rec["error"] = "error event: %s" % j["error"].get("message")
                return rec
            if j.get("usage"):
                rec["tokens"] = j["usage"]["completion_tokens"]
            if any(c.get("finish_reason") is None for c in j.get("choices", [])):
                now = time.perf_counter()
                if last is None:
                    rec["ttft"] = now - t0
                else:
                    rec["itl"].append(now - last)
                last = now
        if not done:
            rec["error"] = "the stream ended without [DONE]"
        elif rec["tokens"] != n:
            rec["error"] = "%d of %d tokens" % (rec["tokens"], n)
        elif rec["ttft"] is None:
            rec["error"] = "no chunk carried a token"
    except Exception as e:  # a reset, a timeout: the request failed
        rec["error"] = "%s: %s" % (type(e).__name__, e)
    finally:
        conn.close()
        rec["latency"] = time.perf_counter() - t0
    return rec


def run_clients(a, work, nclients, deadline):
    """nclients threads take requests from work (a list of (prompt, n), popped from the end) until it is empty
    or, with a deadline, until then (work is then endless: it is drawn again); returns their records."""
    records, lock = [], threading.Lock()
    rnd = random.Random(a.seed + os.getpid())

    def client():
        while True:
            with lock:
                if deadline is not None:
                    if time.perf_counter() >= deadline:
                        return
                    prompt, n = work[rnd.randrange(len(work))]
                elif not work:
                    return
                else:
                    prompt, n = work.pop()
            rec = one_request(a, prompt, n)
            with lock:
                records.append(rec)

    threads = [threading.Thread(target=client) for _ in range(nclients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return records


def _proc_main(args):
    return run_clients(*args)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--model", default=None, help="the 'model' field (default: none sent)")
    p.add_argument("--api-key", default=None)
    p.add_argument("--clients", type=int, default=16, help="concurrent streaming clients")
    p.add_argument("--requests", type=int, default=None, help="requests in all (default: 4 per client)")
    p.add_argument("--duration", type=float, default=None,
                   help="seconds to keep sending (instead of --requests); what is in flight then finishes")
    p.add_argument("--prompt-len", type=span, default=(128, 512), help="prompt tokens MIN:MAX (uniform)")
    p.add_argument("--output-len", type=span, default=(64, 128), help="output tokens MIN:MAX (uniform)")
    p.add_argument("--vocab", type=span, default=(100, 10000), help="the random prompt token ids MIN:MAX")
    p.add_argument("--temperature", type=float, default=0.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--timeout", type=float, default=600)
    p.add_argument("--procs", type=int, default=0,
                   help="client processes (default: one per 8 clients, at most the CPUs)")
    p.add_argument("--json", metavar="FILE", help="also write the summary as JSON")
    a = p.parse_args()
    if a.clients < 1:
        p.error("--clients must be at least 1")
    procs = a.procs or min((a.clients + 7) // 8, os.cpu_count() or 1)
    procs = max(1, min(procs, a.clients))
    total = None if a.duration else (a.requests or 4 * a.clients)
    rnd = random.Random(a.seed)
    nwork = total if total else 1024  # with --duration, requests are drawn from this pool
    work = [([rnd.randint(*a.vocab) for _ in range(rnd.randint(*a.prompt_len))], rnd.randint(*a.output_len))
            for _ in range(nwork)]
    t0 = time.perf_counter()
    deadline = t0 + a.duration if a.duration else None
    # the clients and the requests dealt round-robin to the processes
    jobs = [(a, work if deadline else work[i::procs], a.clients // procs + (i < a.clients % procs), deadline)
            for i in range(procs)]
    if procs == 1:
        parts = [run_clients(*jobs[0])]
    else:
        with multiprocessing.get_context("fork").Pool(procs) as pool:
            parts = pool.map(_proc_main, jobs)
    wall = time.perf_counter() - t0
    records = [r for part in parts for r in part]
    good = [r for r in records if not r["error"]]
    ttft = [r["ttft"] for r in good if r["ttft"] is not None]
    itl = [x for r in good for x in r["itl"]]
    lat = [r["latency"] for r in good]
    out_tokens = sum(r["tokens"] for r in good)
    ms = lambda v: None if v is None else round(v * 1e3, 2)
    summary = {
        "clients": a.clients, "procs": procs, "requests": len(records), "completed": len(good),
        "errors": len(records) - len(good), "duration_s": a.duration,
        "wall_s": round(wall, 3), "output_tokens": out_tokens,
        "prompt_tokens": sum(r["prompt_tokens"] for r in good),
        "output_tok_per_s": round(out_tokens / wall, 2), "requests_per_s": round(len(good) / wall, 3),
        "ttft_ms_p50": ms(percentile(ttft, 50)), "ttft_ms_p99": ms(percentile(ttft, 99)),
        "itl_ms_p50": ms(percentile(itl, 50)), "itl_ms_p99": ms(percentile(itl, 99)),
        "latency_ms_p50": ms(percentile(lat, 50)), "latency_ms_p99": ms(percentile(lat, 99)),
        "prompt_len": list(a.prompt_len), "output_len": list(a.output_len), "temperature": a.temperature,
        "first_errors": [r["error"] for r in records if r["error"]][:5],
    }
    print("clients %d (%d processes), %d requests (%d completed, %d errors) in %.1f s" % (
        a.clients, procs, len(records), len(good), summary["errors"], wall))
    print("output %.1f tok/s (%d tokens), %.2f requests/s" % (
        summary["output_tok_per_s"], out_tokens, summary["requests_per_s"]))
    for name in ("ttft", "itl", "latency"):
        print("%-8s p50 %s ms, p99 %s ms" % (name, summary[name + "_ms_p50"], summary[name + "_ms_p99"]))
    for e in summary["first_errors"]:
        print("error: %s" % e)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(summary, f, indent=2)
    return 1 if summary["errors"] or not records else 0


if __name__ == "__main__":
    sys.exit(main())
