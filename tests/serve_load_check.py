"""`lathe serve` under load, raw HTTP (stdlib only): run by tests/cli_serve_load_test.sh and `make soak`.

    serve_load_check.py PORT clients32
        32 concurrent streaming clients, distinct prompts, half greedy and half seeded sampling: each gets
        exactly the text (and finish reason) it gets when sent alone, with [DONE]: nothing lost, mixed or cut.
    serve_load_check.py PORT soak PID SECONDS [RSS_MARGIN_MB]
        16 clients for SECONDS, random prompt and output lengths, streamed or whole: no error, every answer
        complete (ignore_eos: exactly max_tokens tokens, [DONE] last), greedy repeats identical, and the
        server's VmRSS at the end within RSS_MARGIN_MB (default 24) of its value after a warm-up.

Prints "ok NAME" or "FAIL NAME: why" per check."""
import http.client
import json
import random
import sys
import threading
import time

PORT = int(sys.argv[1])


def check(name, cond, why):
    print(("ok " + name) if cond else "FAIL %s: %s" % (name, str(why)[:600]), flush=True)


def complete(body, stream):
    """(text, finish_reason, completion tokens, error or None) of one /v1/completions request."""
    conn = http.client.HTTPConnection("127.0.0.1", PORT, timeout=300)
    body = dict(body, stream=stream)
    if stream:
        body["stream_options"] = {"include_usage": True}
    try:
        conn.request("POST", "/v1/completions", json.dumps(body), {"Content-Type": "application/json"})
        r = conn.getresponse()
        data = r.read().decode()
    except Exception as e:  # a reset or a timeout is a failure of the server
        return None, None, None, "%s: %s" % (type(e).__name__, e)
    finally:
        conn.close()
    if r.status != 200:
        return None, None, None, "HTTP %d: %s" % (r.status, data[:300])
    if not stream:
        j = json.loads(data)
        return j["choices"][0]["text"], j["choices"][0]["finish_reason"], j["usage"]["completion_tokens"], None
    events = [line[6:] for line in data.split("\n") if line.startswith("data: ")]
    if not events or events[-1] != "[DONE]":
        return None, None, None, "the stream does not end with [DONE]: %r" % data[-300:]
    text, finish, used = "", None, None
    for ev in events[:-1]:
        j = json.loads(ev)
        if "error" in j:
            return None, None, None, "error event: %s" % ev
        for ch in j["choices"]:
            text += ch.get("text") or ""
            finish = ch.get("finish_reason") or finish
        if j.get("usage"):
            used = j["usage"]["completion_tokens"]
    return text, finish, used, None


def clients32():
    words = ["apple", "river", "engine", "violet", "castle", "thunder", "pencil", "garden"]
    reqs = []
    for i in range(32):
        body = {"prompt": "%s %s number %d:" % (words[i % 8], words[(i * 3 + 1) % 8], i), "max_tokens": 4 + i % 4}
        body.update({"temperature": 0} if i % 2 == 0 else {"temperature": 0.9, "top_p": 0.95, "seed": 1000 + i})
        reqs.append(body)
    alone = [complete(b, True) for b in reqs]
    bad = [(i, a[3]) for i, a in enumerate(alone) if a[3]]
    check("clients32_alone", not bad, bad)
    got = [None] * 32
    start = threading.Barrier(32)

    def client(i):
        start.wait()
        got[i] = complete(reqs[i], True)

    threads = [threading.Thread(target=client, args=(i,)) for i in range(32)]
    t0 = time.time()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    errors = [(i, g[3]) for i, g in enumerate(got) if g[3]]
    check("clients32_no_error", not errors, errors)
    differ = [(i, reqs[i], alone[i][:3], got[i][:3]) for i in range(32) if got[i][:3] != alone[i][:3]]
    check("clients32_same_as_alone", not differ and not errors, differ)
    print("# 32 concurrent streams in %.1f s" % (time.time() - t0), flush=True)


def rss_kb(pid):
    for line in open("/proc/%d/status" % pid):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def soak(pid, seconds, margin_mb=24):
    pid, seconds, margin = int(pid), float(seconds), float(margin_mb) * 1024
    words = "the a of river mountain small quick code light tree sea stone cloud day night red blue".split()
    stop = time.time() + seconds
    warm = time.time() + min(10.0, seconds / 4)
    counts, errors, greedy = [0], [], {}
    rss = {}
    lock = threading.Lock()

    def client(k):
        rnd = random.Random(k)
        while time.time() < stop:
            prompt = " ".join(rnd.choice(words) for _ in range(rnd.randint(1, 24)))
            n = rnd.randint(1, 16)
            body = {"prompt": prompt, "max_tokens": n, "ignore_eos": True}
            sampled = rnd.random() < 0.5
            body.update({"temperature": 0.8, "seed": rnd.randint(0, 1 << 30)} if sampled else {"temperature": 0})
            text, finish, used, err = complete(body, rnd.random() < 0.7)
            with lock:
                counts[0] += 1
                if err is None and (finish != "length" or used != n):
                    err = "incomplete: finish %s, %s of %d tokens" % (finish, used, n)
                if err is None and not sampled:
                    err = None if greedy.setdefault((prompt, n), text) == text else "greedy text changed"
                if err:
                    errors.append(err)
                if "start" not in rss and time.time() >= warm:
                    rss["start"] = rss_kb(pid)

    threads = [threading.Thread(target=client, args=(k,)) for k in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    end = rss_kb(pid)
    start = rss.get("start", end)
    print("# soak: %d requests in %.0f s, %d errors, VmRSS %d kB after warm-up, %d kB at the end"
          % (counts[0], seconds, len(errors), start, end), flush=True)
    check("soak_no_error", not errors and counts[0] > 16, errors[:5] or counts)
    check("soak_rss_flat", end - start <= margin, "VmRSS grew by %d kB (margin %d kB)" % (end - start, margin))


if __name__ == "__main__":
    {"clients32": clients32, "soak": soak}[sys.argv[2]](*sys.argv[3:])
