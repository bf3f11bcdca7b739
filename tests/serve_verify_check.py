"""bench/serve_load.py --verify against a fake OpenAI server that misbehaves on purpose (stdlib only): the check
must find each fault, name it and exit 1, and pass a server that behaves. Run by tests/cli_serve_verify_test.sh.

    serve_verify_check.py FAULT
        FAULT: none (every answer is a function of its request), mixed (from the 40th request on, every third
        answer is the previous request's), spliced (every third: its first two tokens, then the previous
        request's answer), truncated (one answer a token short), mismatch (one answer's last
        logprob moved by 0.01), mismatch_first (one answer's first logprob moved by 0.5), drift (one moved by 1e-6: equal within the tolerance), lost (one stream cut
        before [DONE]).
Prints serve_load.py's output and then the summary as JSON on the last line."""
import hashlib
import http.server
import json
import os
import subprocess
import sys
import tempfile
import threading

FAULT = sys.argv[1]
state = {"count": 0, "last": None, "faulted": False}
lock = threading.Lock()


def answer(body):
    """A random-weights answer (empty text) whose logprobs are a function of the whole request."""
    key = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).digest()
    n = body["max_tokens"]
    return [-8.0 - key[i % len(key)] / 100.0 - i / 1000.0 for i in range(n)]


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def send(self, status, data, ctype="application/json"):
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if self.path == "/tokenize":
            return self.send(400, b'{"error": {"message": "the model has no tokenizer"}}')
        stream = body.pop("stream", False)
        body.pop("stream_options", None)
        lps = answer(body)
        cut = False
        with lock:
            state["count"] += 1
            count = state["count"]
            if FAULT == "mixed" and count >= 40 and count % 3 == 0 and state["last"]:
                lps = state["last"]
            if FAULT == "spliced" and count >= 40 and count % 3 == 0 and state["last"]:
                lps = (lps[:2] + state["last"] * 2)[:len(lps)]
            state["last"] = answer(body)
            once = count >= 40 and not state["faulted"] and (stream or FAULT != "lost")
            if once and FAULT in ("truncated", "mismatch", "mismatch_first", "drift", "lost"):
                state["faulted"] = True
                if FAULT == "truncated":
                    lps = lps[:-1]
                elif FAULT == "mismatch":
                    lps = lps[:-1] + [lps[-1] + 0.01]
                elif FAULT == "mismatch_first":
                    lps = [lps[0] + 0.5] + lps[1:]
                elif FAULT == "drift":
                    lps = lps[:-1] + [lps[-1] + 1e-6]
                cut = FAULT == "lost" and stream
        usage = {"prompt_tokens": len(body["prompt"]), "completion_tokens": len(lps),
                 "total_tokens": len(body["prompt"]) + len(lps)}
        if not stream:
            choice = {"index": 0, "text": "", "finish_reason": "length",
                      "logprobs": {"tokens": [""] * len(lps), "token_logprobs": lps}}
            return self.send(200, json.dumps({"choices": [choice], "usage": usage}).encode())
        events = [{"choices": [{"index": 0, "text": "", "finish_reason": None,
                                "logprobs": {"tokens": [""], "token_logprobs": [lp]}}]} for lp in lps]
        events += [{"choices": [{"index": 0, "text": "", "finish_reason": "length"}]}, {"choices": [], "usage": usage}]
        data = b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in events)
        if cut:
            data = data[:len(data) // 2]
        else:
            data += b"data: [DONE]\n\n"
        self.send(200, data, "text/event-stream")


server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
threading.Thread(target=server.serve_forever, daemon=True).start()
here = os.path.dirname(os.path.abspath(__file__))
with tempfile.NamedTemporaryFile(suffix=".json") as out:
    p = subprocess.run([sys.executable, os.path.join(here, "..", "bench", "serve_load.py"), "--port",
                        str(server.server_address[1]), "--clients", "4", "--requests", "120", "--verify", "--pool", "6",
                        "--prompt-len", "4:8", "--output-len", "6:10", "--show", "100",
                        "--json", out.name],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120)
    print(p.stdout)
    summary = json.load(open(out.name))
server.shutdown()
summary["exit"] = p.returncode
print(json.dumps(summary))
