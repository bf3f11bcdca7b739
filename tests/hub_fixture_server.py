#!/usr/bin/env python3
"""A local stand-in for the Hugging Face Hub, for `lathe pull`'s tests: serves a few repositories the way
the Hub does (a tree listing with sizes, git blob ids and LFS SHA-256s; /resolve/ URLs that redirect LFS
files to a CDN path; byte ranges), plus repositories that misbehave on purpose:

  lathe-test/tiny-llama   a Hugging Face model (tests/fixtures/models/llama) and a small GGUF
  lathe-test/flaky        the same files; the CDN drops the connection halfway through each file's first
                          request, so a pull must resume with a range
  lathe-test/norange      the same files; the CDN ignores ranges (a resumed pull must start over)
  lathe-test/corrupt      the listing's checksum is right, but one byte of the weights is served flipped
  lathe-test/gated        needs "Authorization: Bearer secret-token"
  lathe-test/gguf-only    only GGUF files (Q4_K_M and Q8_0 variants of one blob)

Binds 127.0.0.1 on a free port, prints "port N" on stdout, logs one line per request (method, path,
Range header) to --log, and exits after --lifetime seconds at the latest."""
import argparse
import hashlib
import http.server
import json
import os
import sys
import threading

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "models", "llama")
TOKEN = "secret-token"


def load_repo_files(gguf_path):
    files = {}
    for name in ("config.json", "generation_config.json", "model.safetensors"):
        with open(os.path.join(ROOT, name), "rb") as f:
            files[name] = f.read()
    files["README.md"] = b"# tiny llama\n"
    if gguf_path:
        with open(gguf_path, "rb") as f:
            files["tiny.Q4_1.gguf"] = f.read()
    else:
        files["tiny.Q4_1.gguf"] = b"GGUF" + bytes(range(256)) * 40
    return files


def is_lfs(name):
    return name.endswith(".safetensors") or name.endswith(".gguf")


def git_blob_id(data):
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


class Hub:
    def __init__(self, gguf_path):
        base = load_repo_files(gguf_path)
        blob = base["tiny.Q4_1.gguf"]
        self.repos = {
            "lathe-test/tiny-llama": base,
            "lathe-test/flaky": base,
            "lathe-test/norange": base,
            "lathe-test/corrupt": base,
            "lathe-test/gated": base,
            "lathe-test/gguf-only": {"m-Q4_K_M.gguf": blob, "m-Q8_0.gguf": blob[::-1], "README.md": b"gguf\n"},
        }
        self.dropped = set()
        self.lock = threading.Lock()

    def tree(self, repo):
        out = []
        for name, data in sorted(self.repos[repo].items()):
            e = {"type": "file", "oid": git_blob_id(data), "size": len(data), "path": name}
            if is_lfs(name):
                e["lfs"] = {"oid": hashlib.sha256(data).hexdigest(), "size": len(data), "pointerSize": 134}
            out.append(e)
        out.append({"type": "directory", "oid": "0" * 40, "size": 0, "path": "docs"})
        return out


def make_handler(hub, log):
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, fmt, *args):
            pass

        def send_body(self, code, body, ctype="application/json", extra=None):
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            for k, v in (extra or {}).items():
                self.send_header(k, v)
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def error(self, code, msg):
            self.send_body(code, json.dumps({"error": msg}).encode())

        def do_HEAD(self):
            self.do_GET()

        def do_GET(self):
            rng = self.headers.get("Range", "")
            with hub.lock:
                log.write(f"{self.command} {self.path} range={rng}\n")
                log.flush()
            path = self.path.split("?")[0]
            parts = path.strip("/").split("/")
            if len(parts) >= 6 and parts[0] == "api" and parts[1] == "models" and parts[4] == "tree":
                repo = parts[2] + "/" + parts[3]
                if repo not in hub.repos:
                    return self.error(404, "Repository not found")
                if repo == "lathe-test/gated" and self.headers.get("Authorization") != f"Bearer {TOKEN}":
                    return self.error(401, "Access to this model is restricted")
                return self.send_body(200, json.dumps(hub.tree(repo)).encode())
            if len(parts) >= 5 and parts[2] == "resolve":
                repo, name = parts[0] + "/" + parts[1], "/".join(parts[4:])
                files = hub.repos.get(repo)
                if files is None or name not in files:
                    return self.error(404, "Entry not found")
                if repo == "lathe-test/gated" and self.headers.get("Authorization") != f"Bearer {TOKEN}":
                    return self.error(401, "Access to this model is restricted")
                if is_lfs(name):  # the Hub sends LFS files to its CDN
                    return self.send_body(302, b"", "text/plain", {"Location": f"/cdn/{repo}/{name}"})
                return self.serve(repo, name, files[name], rng)
            if len(parts) >= 4 and parts[0] == "cdn":
                repo, name = parts[1] + "/" + parts[2], "/".join(parts[3:])
                files = hub.repos.get(repo)
                if files is None or name not in files:
                    return self.error(404, "Entry not found")
                return self.serve(repo, name, files[name], rng)
            return self.error(404, "no such route")

        def serve(self, repo, name, data, rng):
            if repo == "lathe-test/corrupt" and name == "model.safetensors":
                data = data[:1000] + bytes([data[1000] ^ 1]) + data[1001:]
            start = 0
            if rng.startswith("bytes=") and repo != "lathe-test/norange":
                start = int(rng[6:].split("-")[0])
                if start >= len(data):
                    return self.send_body(416, b"", "text/plain", {"Content-Range": f"bytes */{len(data)}"})
            body = data[start:]
            code = 206 if start else 200
            extra = {"Accept-Ranges": "bytes"}
            if start:
                extra["Content-Range"] = f"bytes {start}-{len(data) - 1}/{len(data)}"
            drop = False
            if repo in ("lathe-test/flaky", "lathe-test/norange") and len(data) > 1000:
                with hub.lock:
                    key = (repo, name)
                    drop = key not in hub.dropped
                    hub.dropped.add(key)
            self.send_response(code)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(len(body)))
            for k, v in extra.items():
                self.send_header(k, v)
            self.end_headers()
            if self.command == "HEAD":
                return
            if drop:  # half the bytes, then the connection goes away
                self.wfile.write(body[: len(body) // 2])
                self.wfile.flush()
                self.close_connection = True
                self.connection.shutdown(2)
                return
            self.wfile.write(body)

    return Handler


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        pass  # clients that hang up mid-transfer are part of the tests


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--log", required=True)
    ap.add_argument("--gguf", help="a real GGUF file to serve as tiny.Q4_1.gguf")
    ap.add_argument("--lifetime", type=float, default=300)
    a = ap.parse_args()
    hub = Hub(a.gguf)
    log = open(a.log, "a")
    srv = Server(("127.0.0.1", 0), make_handler(hub, log))
    print(f"port {srv.server_address[1]}", flush=True)
    threading.Timer(a.lifetime, srv.shutdown).start()
    srv.serve_forever()
    sys.exit(0)


if __name__ == "__main__":
    main()
