"""Raw-HTTP checks of `lathe serve` (stdlib only), run by tests/cli_serve_test.sh against a running server.

    serve_check.py PORT SECTION [ARGS...]

Prints "ok NAME" or "FAIL NAME: why" per check, as the CLI test scripts do. Sections:
  main GENERATE_JSON   completions, chat, streaming, stop strings, usage, errors, concurrency, disconnect
  auth KEY             401 without or with a wrong key, 200 with it, 503 when the queue (--max-queue 1) is full
"""
import http.client
import json
import socket
import sys
import threading
import time

PORT = int(sys.argv[1])


def ok(name):
    print("ok " + name, flush=True)


def fail(name, why):
    print("FAIL %s: %s" % (name, why), flush=True)


def check(name, cond, why):
    (ok if cond else lambda n: fail(n, why))(name)


def request(method, path, body=None, headers=None, raw=None, timeout=120):
    c = http.client.HTTPConnection("127.0.0.1", PORT, timeout=timeout)
    h = {"Content-Type": "application/json"}
    h.update(headers or {})
    data = raw if raw is not None else (json.dumps(body) if body is not None else None)
    c.request(method, path, body=data, headers=h)
    r = c.getresponse()
    text = r.read().decode()
    c.close()
    try:
        j = json.loads(text)
    except ValueError:
        j = None
    return r.status, j, text, r


def post(path, body, **kw):
    return request("POST", path, body, **kw)


def events(path, body, headers=None):
    """The data payloads of a streamed answer, in order ('[DONE]' included)."""
    c = http.client.HTTPConnection("127.0.0.1", PORT, timeout=120)
    h = {"Content-Type": "application/json"}
    h.update(headers or {})
    c.request("POST", path, body=json.dumps(body), headers=h)
    r = c.getresponse()
    out = []
    for frame in r.read().decode().split("\n\n"):
        if frame.startswith("data: "):
            out.append(frame[6:])
    c.close()
    return r.status, r.getheader("Content-Type"), out


def streamed_text(evs, chat):
    parts = []
    for e in evs:
        if e == "[DONE]":
            break
        j = json.loads(e)
        for ch in j["choices"]:
            parts.append(ch["delta"].get("content", "") if chat else ch["text"])
    return "".join(parts)


def finish_of(evs):
    reasons = [json.loads(e)["choices"][0]["finish_reason"] for e in evs if e != "[DONE]" and json.loads(e)["choices"]]
    return [r for r in reasons if r]


def metric(name):
    _, _, text, _ = request("GET", "/metrics")
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return None


def main_section(gen_json):
    gen = json.load(open(gen_json))
    prompt = "The capital of France is"
    n = len(gen["tokens"])
    # completions: greedy equals `lathe generate --greedy` for the same prompt and budget
    st, j, text, _ = post("/v1/completions", {"prompt": prompt, "max_tokens": n, "temperature": 0})
    if st != 200 or not j:
        fail("completion", "status %d: %s" % (st, text[:300]))
        return
    ch = j["choices"][0]
    check("completion_equals_generate", ch["text"] == gen["text"], "%r vs generate's %r" % (ch["text"], gen["text"]))
    check("completion_shape", j["object"] == "text_completion" and j["id"].startswith("cmpl-") and ch["index"] == 0
          and isinstance(j["created"], int) and j["model"], text[:300])
    check("completion_finish_length", ch["finish_reason"] == "length", ch["finish_reason"])
    _, tok, _, _ = post("/tokenize", {"content": prompt, "add_special": True})
    u = j["usage"]
    check("completion_usage", u["prompt_tokens"] == len(tok["tokens"]) and u["completion_tokens"] == n
          and u["total_tokens"] == u["prompt_tokens"] + n, "usage %s, prompt tokens %s" % (u, tok))
    st, _, detok, _ = post("/detokenize", {"tokens": gen["tokens"]})
    check("detokenize", st == 200 and json.loads(detok)["content"] == gen["text"], detok[:200])
    # token-id prompt and echo
    st, j2, text, _ = post("/v1/completions", {"prompt": gen["prompt_tokens"], "max_tokens": n, "temperature": 0,
                                               "echo": True})
    check("completion_token_prompt_echo", st == 200 and j2["choices"][0]["text"].endswith(gen["text"])
          and len(j2["choices"][0]["text"]) > len(gen["text"]), text[:300])

    # streaming: the deltas joined are the whole answer; include_usage adds a usage chunk
    st, ctype, evs = events("/v1/completions", {"prompt": prompt, "max_tokens": n, "temperature": 0, "stream": True,
                                                "stream_options": {"include_usage": True}})
    check("stream_content_type", st == 200 and ctype.startswith("text/event-stream"), "%s %s" % (st, ctype))
    check("stream_done", evs and evs[-1] == "[DONE]", str(evs[-2:]))
    check("stream_equals_whole", streamed_text(evs, False) == gen["text"], "%r" % streamed_text(evs, False))
    usage = [json.loads(e).get("usage") for e in evs[:-1]]
    check("stream_usage", usage[-1] and usage[-1]["completion_tokens"] == n and all(x is None for x in usage[:-1]),
          str(usage))

    # stop strings: cut from the text, also when streamed (the stop spans tokens: held back, then dropped)
    cut = gen["text"].find("\n\n")
    if cut > 0:
        want = gen["text"][:cut]
        body = {"prompt": prompt, "max_tokens": n, "temperature": 0, "stop": ["\n\nThe", "zzz"]}
        st, j, text, _ = post("/v1/completions", body)
        check("stop_excluded", st == 200 and j["choices"][0]["text"] == want
              and j["choices"][0]["finish_reason"] == "stop", text[:300])
        body["stream"] = True
        st, _, evs = events("/v1/completions", body)
        check("stop_excluded_stream", streamed_text(evs, False) == want and finish_of(evs) == ["stop"],
              "%r %s" % (streamed_text(evs, False), finish_of(evs)))
    else:
        fail("stop_excluded", "generate's text has no blank line to stop at: %r" % gen["text"])

    # chat, whole and streamed
    msgs = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Say hello."}]
    st, j, text, _ = post("/v1/chat/completions", {"messages": msgs, "max_tokens": 4, "temperature": 0})
    ok_chat = st == 200 and j["object"] == "chat.completion" and j["choices"][0]["message"]["role"] == "assistant"
    check("chat", ok_chat and j["id"].startswith("chatcmpl-"), text[:300])
    st, _, evs = events("/v1/chat/completions", {"messages": msgs, "max_tokens": 4, "temperature": 0, "stream": True})
    first = json.loads(evs[0])
    check("chat_stream_chunks", first["object"] == "chat.completion.chunk"
          and first["choices"][0]["delta"].get("role") == "assistant", evs[0])
    if ok_chat:
        check("chat_stream_equals_whole", streamed_text(evs, True) == j["choices"][0]["message"]["content"],
              "%r vs %r" % (streamed_text(evs, True), j["choices"][0]["message"]["content"]))

    errors()
    concurrent(prompt)
    disconnect(prompt)


def expect_error(name, status, method, path, body=None, raw=None, param=None):
    st, j, text, r = request(method, path, body, raw=raw)
    good = st == status and j and set(j.get("error", {})) == {"message", "type", "param", "code"}
    if good and param is not None:
        good = j["error"]["param"] == param
    check(name, good, "status %d: %s" % (st, text[:300]))
    return r


def errors():
    expect_error("error_malformed_json", 400, "POST", "/v1/completions", raw='{"prompt": ')
    expect_error("error_wrong_type", 400, "POST", "/v1/completions", {"prompt": "x", "max_tokens": "8"},
                 param="max_tokens")
    expect_error("error_unsupported_field", 400, "POST", "/v1/chat/completions",
                 {"messages": [{"role": "user", "content": "x"}], "tools": []}, param="tools")
    expect_error("error_n", 400, "POST", "/v1/completions", {"prompt": "x", "n": 2, "stream": True}, param="n")
    expect_error("error_penalty", 400, "POST", "/v1/completions", {"prompt": "x", "presence_penalty": 3},
                 param="presence_penalty")
    expect_error("error_unknown_model", 400, "POST", "/v1/completions", {"prompt": "x", "model": "nope"},
                 param="model")
    st, j, text, _ = post("/v1/completions", {"prompt": "hi " * 400, "max_tokens": 1})  # the server has --ctx 256
    check("error_prompt_too_long", st == 400 and "context holds 256" in j["error"]["message"]
          and j["error"]["code"] == "context_length_exceeded", text[:300])
    expect_error("error_404", 404, "GET", "/v1/nothing")
    r = expect_error("error_405", 405, "GET", "/v1/completions")
    check("error_405_allow", r.getheader("Allow") == "POST", str(r.getheader("Allow")))
    expect_error("error_413", 413, "POST", "/v1/completions", raw='{"prompt": "%s"}' % ("a" * 5000))
    expect_error("embeddings_empty", 400, "POST", "/v1/embeddings", {"input": ""}, param="input")
    expect_error("embeddings_empty_list", 400, "POST", "/v1/embeddings", {"input": []}, param="input")
    expect_error("embeddings_format", 400, "POST", "/v1/embeddings", {"input": "x", "encoding_format": "hex"},
                 param="encoding_format")
    expect_error("embeddings_mixed", 400, "POST", "/v1/embeddings", {"input": ["x", [1, 2]]}, param="input")
    st, j, text, _ = post("/v1/embeddings", {"input": [1] * 300})
    check("embeddings_too_long", st == 400 and "300 tokens" in j["error"]["message"] and "context of 256"
          in j["error"]["message"] and j["error"]["code"] == "context_length_exceeded", text[:300])
    st, j, _, _ = request("GET", "/health")
    check("health", st == 200 and j == {"status": "ok"}, str(j))
    st, j, _, _ = request("GET", "/v1/models")
    check("models", st == 200 and j["object"] == "list" and j["data"][0]["object"] == "model", str(j))


def concurrent(prompt):
    """8 streaming clients with distinct prompts at once each get what that prompt gets alone."""
    prompts = ["%s %d" % (w, i) for i, w in enumerate(["Once upon a time", "The sky is", "My favourite food is",
                                                       "In 1990", "Dogs are", "The best way to learn is",
                                                       "Water boils at", "Hello, my name is"])]
    alone = [post("/v1/completions", {"prompt": p, "max_tokens": 3, "temperature": 0})[1]["choices"][0]["text"]
             for p in prompts]
    got = [None] * len(prompts)

    def client(i):
        _, _, evs = events("/v1/completions", {"prompt": prompts[i], "max_tokens": 3, "temperature": 0,
                                               "stream": True})
        got[i] = streamed_text(evs, False) if evs and evs[-1] == "[DONE]" else None

    threads = [threading.Thread(target=client, args=(i,)) for i in range(len(prompts))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    bad = [(p, a, g) for p, a, g in zip(prompts, alone, got) if a != g]
    check("concurrent_streams_equal_alone", not bad, "prompt, alone, batched: %s" % bad)


def wait_idle():
    t0 = time.time()
    while time.time() - t0 < 20 and (metric("lathe_running_sequences") or metric("lathe_waiting_sequences")):
        time.sleep(0.2)
    return metric("lathe_running_sequences"), metric("lathe_waiting_sequences"), metric("lathe_kv_blocks_used")


def disconnect(prompt):
    """A client that goes away, mid-stream or while waiting for a whole answer, has its sequence cancelled (no
    running sequence and no KV block held afterwards)."""
    for stream in (True, False):
        name = "disconnect_cancels" + ("_stream" if stream else "_whole")
        s = socket.create_connection(("127.0.0.1", PORT))
        body = json.dumps({"prompt": prompt, "max_tokens": 500, "temperature": 0, "stream": stream,
                           "ignore_eos": True})
        s.sendall(("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                   "Content-Length: %d\r\n\r\n%s" % (len(body), body)).encode())
        if stream:
            got = b""
            while got.count(b"data: ") < 2:
                chunk = s.recv(4096)
                if not chunk:
                    break
                got += chunk
        else:
            t0 = time.time()
            while time.time() - t0 < 20 and metric("lathe_running_sequences") != 1:
                time.sleep(0.1)
        running = metric("lathe_running_sequences")
        s.close()
        left = wait_idle()
        check(name, running == 1 and left == (0, 0, 0),
              "running %s before closing; after: running, waiting, blocks %s" % (running, left))


def auth_section(key):
    st, j, _, _ = request("GET", "/v1/models")
    check("auth_missing_401", st == 401 and j["error"]["type"] == "authentication_error", str(j))
    st, _, _, _ = request("GET", "/v1/models", headers={"Authorization": "Bearer wrong" + key})
    check("auth_wrong_401", st == 401, str(st))
    st, _, _, _ = request("GET", "/v1/models", headers={"Authorization": "Bearer " + key[:-1]})
    check("auth_prefix_401", st == 401, str(st))
    st, _, _, _ = request("GET", "/v1/models", headers={"Authorization": "Bearer " + key})
    check("auth_right_200", st == 200, str(st))
    st, _, _, _ = request("GET", "/health")
    check("auth_health_open", st == 200, str(st))
    # --max-queue 1: a second request while one streams is refused with 503 and Retry-After
    s = socket.create_connection(("127.0.0.1", PORT))
    body = json.dumps({"prompt": "Hello", "max_tokens": 500, "stream": True, "ignore_eos": True})
    s.sendall(("POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"
               "Content-Length: %d\r\n\r\n%s" % (key, len(body), body)).encode())
    s.recv(4096)
    st, j, text, r = post("/v1/completions", {"prompt": "x", "max_tokens": 1},
                          headers={"Authorization": "Bearer " + key})
    check("queue_full_503", st == 503 and r.getheader("Retry-After") and j["error"]["message"], text[:200])
    s.close()


if __name__ == "__main__":
    {"main": main_section, "auth": auth_section}[sys.argv[2]](*sys.argv[3:])
