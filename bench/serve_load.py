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

--verify checks every answer's content, not only its length: a fixed pool of --pool distinct requests (token-id
prompts, or text prompts when the server has a tokenizer; half greedy, half seeded temperature sampling; each
its own max_tokens, ignore_eos) whose references are first taken alone, one request at a time (streamed); then
the clients draw pool entries at random, streamed or whole (--stream-fraction), and each answer must equal its
reference exactly: text, finish_reason, token count and, with logprobs (always without a tokenizer, whose
answers have empty text; --logprobs otherwise), the chosen tokens' log-probabilities. A failure is counted as
lost (an HTTP error, an error event, a stream without [DONE]), truncated (fewer or more tokens than max_tokens),
mixed (the answer is, or contains, a different pool entry's reference) or mismatched (any other difference).
Exact equality is the right test against a server run with --batch-invariant (or one whose batching does not
change results, as the CPU's); the exit status is 1 on any failure.

    python3 bench/serve_load.py --port 8000 --clients 16 --requests 64 --prompt-len 128:512 --output-len 64:128
    python3 bench/serve_load.py ... --duration 30 --json out.json   # for 30 s; the summary also as JSON
    python3 bench/serve_load.py ... --clients 64 --duration 600 --verify --pool 128   # no lost, mixed or cut answer
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


def one_request(a, prompt, n, extra=None, stream=True):
    """Sends one completion (streamed unless stream is false); returns a record of its timings, tokens, text,
    finish_reason and chosen-token logprobs (or its error; "kind" names the failure: lost or truncated)."""
    body = {"prompt": prompt, "max_tokens": n, "temperature": a.temperature, "ignore_eos": True}
    if stream:
        body.update(stream=True, stream_options={"include_usage": True})
    body.update(extra or {})
    if a.model:
        body["model"] = a.model
    headers = {"Content-Type": "application/json"}
    if a.api_key:
        headers["Authorization"] = "Bearer " + a.api_key
    rec = {"prompt_tokens": len(prompt), "max_tokens": n, "error": None, "kind": None, "ttft": None, "itl": [],
           "tokens": 0, "text": "", "finish": None, "logprobs": [], "stream": stream}
    t0 = time.perf_counter()
    conn = http.client.HTTPConnection(a.host, a.port, timeout=a.timeout)

    def take(choice):
        rec["text"] += choice.get("text") or ""
        rec["finish"] = choice.get("finish_reason") or rec["finish"]
        lp = choice.get("logprobs")
        if lp:
            rec["logprobs"] += lp.get("token_logprobs") or []

    try:
        conn.request("POST", "/v1/completions", json.dumps(body), headers)
        r = conn.getresponse()
        if r.status != 200:
            rec["error"] = "HTTP %d: %s" % (r.status, r.read()[:200].decode(errors="replace"))
            return rec
        if not stream:
            j = json.loads(r.read())
            for c in j.get("choices", []):
                take(c)
            rec["tokens"] = j["usage"]["completion_tokens"]
            rec["ttft"] = time.perf_counter() - t0
        last, done = None, False
        while stream:
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
            for c in j.get("choices", []):
                take(c)
            if any(c.get("finish_reason") is None for c in j.get("choices", [])):
                now = time.perf_counter()
                if last is None:
                    rec["ttft"] = now - t0
                else:
                    rec["itl"].append(now - last)
                last = now
        if stream and not done:
            rec["error"] = "the stream ended without [DONE]"
        elif rec["tokens"] != n:
            rec["error"], rec["kind"] = "%d of %d tokens" % (rec["tokens"], n), "truncated"
        elif rec["ttft"] is None:
            rec["error"] = "no chunk carried a token"
    except Exception as e:  # a reset, a timeout: the request failed
        rec["error"] = "%s: %s" % (type(e).__name__, e)
    finally:
        conn.close()
        rec["latency"] = time.perf_counter() - t0
        if rec["error"] and not rec["kind"]:
            rec["kind"] = "lost"
    return rec


def answer_of(rec):
    """What --verify compares: the text, finish_reason, token count and chosen-token logprobs."""
    return (rec["text"], rec["finish"], rec["tokens"], tuple(rec["logprobs"]))


def close(x, y, tol):
    """Two logprob lists equal within tol each (None, a logprob JSON cannot hold, only equal to None)."""
    return len(x) == len(y) and all(a == b or (a is not None and b is not None and abs(a - b) <= tol)
                                    for a, b in zip(x, y))


def same(got, want, tol):
    return got[:3] == want[:3] and close(got[3], want[3], tol)


def contains(seq, sub, tol):
    """seq has sub as a contiguous part (strings, or logprob tuples equal within tol)."""
    if isinstance(seq, str):
        return sub in seq
    m = len(sub)
    return any(close(seq[i:i + m], sub, tol) for i in range(len(seq) - m + 1))


def judge(refs, k, rec, tol):
    """None when rec (an answer to pool entry k) equals its reference refs[k]; ("drift", why) when it does but
    for logprobs that differ by at most tol (the same tokens; a last-bit difference of the logits); else (kind,
    why) with kind mixed (it is, or its text or logprobs contain, another entry's reference: a piece of at least 8
    characters or 4 logprobs) or mismatched."""
    got, want = answer_of(rec), refs[k]
    if got == want:
        return None
    if same(got, want, tol):
        worst = max(abs(a - b) for a, b in zip(got[3], want[3]) if a is not None and b is not None)
        return "drift", "entry %d: logprobs differ by up to %.3g from its answer alone" % (k, worst)
    for j, other in enumerate(refs):
        if j == k:
            continue
        if same(got, other, tol):
            return "mixed", "entry %d got entry %d's whole answer" % (k, j)
        for part, name, least in ((0, "text", 8), (3, "logprobs", 4)):
            piece = other[part][:max(least, len(other[part]) // 4)]
            if len(piece) >= least and contains(got[part], piece, tol):
                return "mixed", "entry %d's %s contains the start of entry %d's" % (k, name, j)
    diff = [name for i, name in enumerate(("text", "finish_reason", "tokens", "logprobs"))
            if (got[i] != want[i] if i < 3 else not close(got[i], want[i], tol))]
    first = next((i for i, (x, y) in enumerate(zip(got[3], want[3])) if not close([x], [y], tol)), None)
    # equal (within tol) for the first tokens, then not: a near tie decided the other way after a drift, or tokens
    # of another request from then on; told apart from an answer wrong from its first token
    kind = "mismatched" if not first else "mismatched_later"
    return kind, "entry %d (%s): %s differ%s; got text %r finish %s tokens %d, alone %r %s %d" % (
        k, "streamed" if rec["stream"] else "whole", ", ".join(diff),
        "" if first is None else " (logprobs from token %d: %r, alone %r)" % (first, got[3][first], want[3][first]),
        got[0][:60], got[1], got[2], want[0][:60], want[1], want[2])


def run_clients(a, work, nclients, deadline, refs=None):
    """nclients threads take requests from work (a list of (prompt, n, extra, k), popped from the end) until it
    is empty or, with a deadline, until then (work is then endless: it is drawn again); returns their records.
    With refs (--verify: k is the request's pool entry, refs[k] its answer alone), each record is judged and
    loses its text and logprobs."""
    records, lock = [], threading.Lock()
    rnd = random.Random(a.seed + os.getpid())

    def client():
        while True:
            with lock:
                if deadline is not None:
                    if time.perf_counter() >= deadline:
                        return
                    prompt, n, extra, k = work[rnd.randrange(len(work))]
                elif not work:
                    return
                else:
                    prompt, n, extra, k = work.pop()
                stream = refs is None or rnd.random() < a.stream_fraction
            rec = one_request(a, prompt, n, extra, stream)
            if refs is not None:
                if not rec["error"] or rec["kind"] == "truncated":  # a cut answer may be another entry's whole one
                    verdict = judge(refs, k, rec, a.logprob_tol)
                    if rec["error"]:
                        if verdict and verdict[0] == "mixed":
                            rec["kind"], rec["error"] = verdict
                    elif verdict and verdict[0] == "drift" and not a.exact:
                        rec["kind"], rec["drift"] = verdict
                    elif verdict:
                        rec["kind"], rec["error"] = verdict
                        if rec["kind"] == "mismatched_later":
                            rec["kind"], rec["later"] = "mismatched", True
                del rec["text"], rec["logprobs"]
            with lock:
                records.append(rec)

    threads = [threading.Thread(target=client) for _ in range(nclients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return records


def has_tokenizer(a):
    """The server encodes text (POST /tokenize answers 200); a model served with --random-weights has none."""
    conn = http.client.HTTPConnection(a.host, a.port, timeout=60)
    try:
        headers = {"Content-Type": "application/json"}
        if a.api_key:
            headers["Authorization"] = "Bearer " + a.api_key
        conn.request("POST", "/tokenize", json.dumps({"content": "hello"}), headers)
        r = conn.getresponse()
        r.read()
        return r.status == 200
    finally:
        conn.close()


WORDS = ("the a of river mountain small quick code light tree sea stone cloud day night red blue engine violet "
         "castle thunder pencil garden apple story number seven king road window").split()


def verify_pool(a, rnd, text):
    """--pool distinct entries (prompt, max_tokens, extra): even ones greedy, odd ones seeded sampling."""
    pool, seen = [], set()
    while len(pool) < a.pool:
        n_in = rnd.randint(*a.prompt_len)
        if text:
            prompt = "%d: %s" % (len(pool), " ".join(rnd.choice(WORDS) for _ in range(n_in)))
        else:
            prompt = [rnd.randint(*a.vocab) for _ in range(n_in)]
        if repr(prompt) in seen:
            continue
        seen.add(repr(prompt))
        i = len(pool)
        extra = {"temperature": 0.0} if i % 2 == 0 else {"temperature": 0.8, "top_p": 0.95, "seed": a.seed * 7919 + i}
        if a.logprobs or not text:
            extra["logprobs"] = 0
        pool.append((prompt, rnd.randint(*a.output_len), extra, i))
    return pool


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
    p.add_argument("--verify", action="store_true",
                   help="every answer must equal its request's answer alone: a pool of --pool requests is answered "
                        "alone first, then drawn at random under load (bench/README.md)")
    p.add_argument("--pool", type=int, default=64, help="--verify: distinct requests in the pool")
    p.add_argument("--stream-fraction", type=float, default=0.7, help="--verify: the share of streamed requests")
    p.add_argument("--logprobs", action="store_true",
                   help="--verify: compare the chosen tokens' logprobs too (always without a tokenizer)")
    p.add_argument("--logprob-tol", type=float, default=1e-4,
                   help="--verify: logprobs within this of the reference's count as equal, the answer as drift "
                        "(reported; a failure with --exact)")
    p.add_argument("--exact", action="store_true", help="--verify: a logprob drift is a failure (mismatched)")
    p.add_argument("--show", type=int, default=5, help="failures printed (and kept in the JSON)")
    a = p.parse_args()
    if a.clients < 1:
        p.error("--clients must be at least 1")
    if a.pool < 2:
        p.error("--pool must be at least 2")
    procs = a.procs or min((a.clients + 7) // 8, os.cpu_count() or 1)
    procs = max(1, min(procs, a.clients))
    total = None if a.duration else (a.requests or 4 * a.clients)
    rnd = random.Random(a.seed)
    refs, ref_failures, verify = None, [], {}
    if a.verify:
        text = has_tokenizer(a)
        work = verify_pool(a, rnd, text)
        t_ref = time.perf_counter()
        alone = [one_request(a, prompt, n, extra, True) for prompt, n, extra, _ in work]
        refs = [answer_of(r) for r in alone]
        ref_failures = ["reference of entry %d: %s" % (k, r["error"]) for k, r in enumerate(alone) if r["error"]]
        same = len(refs) - len(set(refs))
        verify = {"pool": a.pool, "prompts": "text" if text else "token ids", "logprobs": bool(a.logprobs or not text),
                  "stream_fraction": a.stream_fraction, "reference_s": round(time.perf_counter() - t_ref, 3),
                  "reference_errors": len(ref_failures), "equal_references": same}
        print("verify: %d references alone (%s prompts%s) in %.1f s, %d failed, %d equal to another" % (
            a.pool, verify["prompts"], ", logprobs" if verify["logprobs"] else "", verify["reference_s"],
            len(ref_failures), same))
        if total:  # --requests: drawn from the pool, in order
            work = [work[rnd.randrange(len(work))] for _ in range(total)]
    else:
        nwork = total if total else 1024  # with --duration, requests are drawn from this pool
        work = [([rnd.randint(*a.vocab) for _ in range(rnd.randint(*a.prompt_len))], rnd.randint(*a.output_len), None,
                 None) for _ in range(nwork)]
    t0 = time.perf_counter()
    deadline = t0 + a.duration if a.duration else None
    # the clients and the requests dealt round-robin to the processes
    jobs = [(a, work if deadline else work[i::procs], a.clients // procs + (i < a.clients % procs), deadline, refs)
            for i in range(procs)]
    if procs == 1:
        parts = [run_clients(*jobs[0])]
    else:
        with multiprocessing.get_context("fork").Pool(procs) as pool:
            parts = pool.map(_proc_main, jobs)
    wall = time.perf_counter() - t0
    records = [r for part in parts for r in part]
    good = [r for r in records if not r["error"]]
    ttft = [r["ttft"] for r in good if r["ttft"] is not None and r["stream"]]  # a whole answer has no first token
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
        "first_errors": ref_failures[:a.show] + [r["error"] for r in records if r["error"]][:a.show],
    }
    for kind in ("lost", "truncated", "mismatched", "mixed", "drift"):
        summary[kind] = sum(r["kind"] == kind for r in records)
    summary["first_drifts"] = [r["drift"] for r in records if r.get("drift")][:a.show]
    summary["mismatched_later"] = sum(bool(r.get("later")) for r in records)
    if a.verify:
        summary["verify"] = dict(verify, streamed=sum(r["stream"] for r in records))
    print("clients %d (%d processes), %d requests (%d completed, %d errors) in %.1f s" % (
        a.clients, procs, len(records), len(good), summary["errors"], wall))
    print("output %.1f tok/s (%d tokens), %.2f requests/s" % (
        summary["output_tok_per_s"], out_tokens, summary["requests_per_s"]))
    for name in ("ttft", "itl", "latency"):
        print("%-8s p50 %s ms, p99 %s ms" % (name, summary[name + "_ms_p50"], summary[name + "_ms_p99"]))
    print("failures: %d lost, %d truncated, %d mixed, %d mismatched (%d of them equal to their reference for the "
          "first tokens)" % (summary["lost"], summary["truncated"], summary["mixed"], summary["mismatched"],
                             summary["mismatched_later"]))
    if a.verify and not summary["errors"] and not ref_failures:
        print("verify: every answer equal to its reference alone (%d streamed, %d whole)%s" % (
            summary["verify"]["streamed"], len(records) - summary["verify"]["streamed"],
            "" if not summary["drift"] else ", %d of them but for logprobs within %g of the reference's: %s" % (
                summary["drift"], a.logprob_tol, "; ".join(summary["first_drifts"][:2]))))
    for e in summary["first_errors"]:
        print("error: %s" % e)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(summary, f, indent=2)
    return 1 if summary["errors"] or ref_failures or not records else 0


if __name__ == "__main__":
    sys.exit(main())
