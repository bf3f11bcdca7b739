#!/usr/bin/env bash
# The serving benchmark of issue 17 in one run (an H200 by default): for each config, `lathe serve --config C
# --random-weights`, bench/serve_load.py's streaming clients at 1, 16 and 64 (random prompts of 128-512 token ids,
# 64-128 new tokens each with ignore_eos, so every answer must be exactly its max_tokens), 16 clients with
# 512-token prompts for the time to first token; then the engine offline on the same workload (`lathe bench
# --concurrency 64`, as many requests as the 64-client run completed) for the served / offline ratio. With
# --long S, then for each config a verified long run: its own server started with --batch-invariant (every
# answer is then what it is alone, bit for bit), and serve_load.py --verify at 64 clients for S seconds (a pool of
# SERVE_LONG_POOL requests, default 64, whose references are first taken alone; every answer is compared
# exactly: no lost, truncated, mixed or mismatched one); --long-only runs just that. Prints one table; $OUT
# (default: a new temporary directory) gets summary.json (every run's serve_load.py summary and the offline
# bench's JSON), table.md, logs.txt (the servers' and benches' stderr) and, last, done (this script's exit
# status), so that it can run detached (setsid nohup ... &) and be collected later; the per-run files and the
# compile cache stay in a work directory ($WORK). Needs python3 (standard library only), nothing from the network.
#
#   bench/serve_h200.sh LATHE [--libs DIR] [--long SECONDS] [--long-only] [--kv-memory GB] [--configs C1,C2]
#                       [--target cuda|cpu] [--quick]
#
# --libs DIR: shared libraries lathe needs that the machine lacks (bench/carry_lathe.sh gathers them); only lathe
# gets them in LD_LIBRARY_PATH (with the CUDA toolkit's lib64, where NVRTC often is), python3 keeps its own.
# --kv-memory GB: every server's (and the offline bench's) KV cache pool, so that another GPU program fits beside
# them (default on CUDA: 8, which holds 64 sequences of 640 positions of Qwen3-8B; 0: the engine's default, 90% of
# the free memory); --quick: a smoke test on the CPU (smollm2-135m, clients 1/4/8, short prompts, outputs and runs: 20-30 s).
# Durations (seconds) can be changed with SERVE_S1, SERVE_S16, SERVE_S64, SERVE_STTFT.
set -u
here=$(cd "$(dirname "$0")" && pwd)
usage() {
  echo "usage: $0 LATHE [--libs DIR] [--long SECONDS] [--long-only] [--kv-memory GB] [--configs C1,C2]" \
    "[--target cuda|cpu] [--quick]" >&2
  exit 2
}
[ $# -ge 1 ] || usage
LATHE=$1; shift
[ -x "$LATHE" ] || { echo "$0: $LATHE is not an executable" >&2; exit 2; }
CONFIGS=llama-3.2-1b,qwen3-8b TARGET=cuda LONG=0 LONG_ONLY=0 QUICK=0 LIBS= KV_MEM=
while [ $# -gt 0 ]; do
  case $1 in
    --long) LONG=${2:?}; shift 2 ;;
    --long-only) LONG_ONLY=1; shift ;;
    --kv-memory) KV_MEM=${2:?}; shift 2 ;;
    --libs) LIBS=$(cd "${2:?}" && pwd) || usage; shift 2 ;;
    --configs) CONFIGS=${2:?}; shift 2 ;;
    --target) TARGET=${2:?}; shift 2 ;;
    --quick) QUICK=1; shift ;;
    *) usage ;;
  esac
done
if [ "$QUICK" = 1 ]; then
  [ "$CONFIGS" = llama-3.2-1b,qwen3-8b ] && CONFIGS=smollm2-135m
  [ "$TARGET" = cuda ] && TARGET=cpu
  CLIENTS=(1 4 8) PROMPT=8:24 OUTPUT=2:4 TTFT_PROMPT=32 CTX=128 LONG_POOL=8
  S1=${SERVE_S1:-1} S16=${SERVE_S16:-1} S64=${SERVE_S64:-2} STTFT=${SERVE_STTFT:-1}
else
  CLIENTS=(1 16 64) PROMPT=128:512 OUTPUT=64:128 TTFT_PROMPT=512 CTX=1024 LONG_POOL=64
  S1=${SERVE_S1:-10} S16=${SERVE_S16:-20} S64=${SERVE_S64:-25} STTFT=${SERVE_STTFT:-12}
fi
MAXC=${CLIENTS[2]}
[ "$LONG_ONLY" = 1 ] && [ "$LONG" = 0 ] && { echo "$0: --long-only needs --long SECONDS" >&2; exit 2; }
[ -z "$KV_MEM" ] && [ "$TARGET" = cuda ] && KV_MEM=8
kv_args=()
[ -n "$KV_MEM" ] && [ "$KV_MEM" != 0 ] && kv_args=(--kv-memory "$KV_MEM")
FINAL=${OUT:-$(mktemp -d /tmp/lathe-serve-bench-XXXXXX)}
mkdir -p "$FINAL"
rm -f "$FINAL/done"
trap 'echo $? >"$FINAL/done"' EXIT # the marker that the results are complete, with the exit status
OUT=${WORK:-$(mktemp -d /tmp/lathe-serve-work-XXXXXX)} # the per-run files
mkdir -p "$OUT"
export LATHE_CACHE_DIR=${LATHE_CACHE_DIR:-$OUT/cache}
# lathe with its libraries (and NVRTC's directory); python3 without them
lathe_path=$LIBS
for d in "${CUDA_HOME:-/usr/local/cuda}/lib64" /usr/local/cuda/lib64; do [ -d "$d" ] && lathe_path=$lathe_path:$d; done
lathe() { LD_LIBRARY_PATH="${lathe_path#:}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" exec "$LATHE" "$@"; }
# (lathe runs in a subshell each time, so that exec makes the server's pid $! itself, for the signal)
(lathe --help) >/dev/null 2>"$OUT/lathe.err" || { echo "$0: $LATHE does not run: $(head -3 "$OUT/lathe.err")" >&2; exit 2; }
failed=0
t_start=$(date +%s)

# start_server CONFIG LOGNAME [SERVE_ARGS...]: sets SPID and PORT once /health says 200 (0), or 1
start_server() {
  local cfg=$1 log=$OUT/$2.serve.log
  shift 2
  (lathe serve --config "$cfg" --random-weights --target "$TARGET" --port 0 --max-seqs "$MAXC" --max-queue 1024 \
    --ctx "$CTX" --drain-s 5 -q "${kv_args[@]}" "$@") 2>"$log" &
  SPID=$!
  PORT=
  for _ in $(seq 1200); do # 10 minutes at most for the compile and the load
    PORT=$(sed -n 's|.*listening on http://127.0.0.1:\([0-9]*\).*|\1|p' "$log")
    if [ -n "$PORT" ] && python3 -c "import sys, urllib.request
sys.exit(urllib.request.urlopen('http://127.0.0.1:$PORT/health', timeout=5).status != 200)" 2>/dev/null; then
      return 0
    fi
    kill -0 "$SPID" 2>/dev/null || break
    sleep 0.5
  done
  echo "$0: lathe serve --config $cfg did not start: $(tail -3 "$log")" >&2
  kill "$SPID" 2>/dev/null
  return 1
}

# stop_server CONFIG: SIGTERM (a shell without job control starts background commands with SIGINT ignored); it
# drains and exits 0
stop_server() {
  kill -TERM "$SPID"
  for _ in $(seq 120); do kill -0 "$SPID" 2>/dev/null || break; sleep 0.5; done
  if kill -0 "$SPID" 2>/dev/null; then
    echo "$0: lathe serve --config $1 did not exit within 60 s of SIGTERM" >&2
    kill -KILL "$SPID"
    failed=1
  fi
  wait "$SPID" || { echo "$0: lathe serve --config $1 exited $?" >&2; failed=1; }
}

# load NAME ARGS...: one serve_load.py run into $OUT/CONFIG.NAME.json
load() {
  local name=$1; shift
  echo "== $cfg: $name: serve_load.py $*"
  if ! python3 "$here/serve_load.py" --port "$PORT" --json "$OUT/$cfg.$name.json" "$@"; then
    echo "$0: $cfg $name: errors (see above)" >&2
    failed=1
  fi
}

IFS=, read -r -a configs <<<"$CONFIGS"
for cfg in "${configs[@]}"; do
  [ "$LONG_ONLY" = 1 ] && break
  t0=$(date +%s)
  start_server "$cfg" "$cfg" || { failed=1; continue; }
  echo "== $cfg: serving on port $PORT after $(( $(date +%s) - t0 )) s ($(head -1 "$OUT/$cfg.serve.log"))"
  # warm-up, not recorded: every batch size from MAXC down once (modules, GEMM heuristics, step graphs)
  python3 "$here/serve_load.py" --port "$PORT" --clients "$MAXC" --requests "$MAXC" --prompt-len "$PROMPT" \
    --output-len "$OUTPUT" >"$OUT/$cfg.warmup.txt" 2>&1 || { echo "$0: $cfg warm-up failed:" >&2; cat "$OUT/$cfg.warmup.txt" >&2; }
  load c${CLIENTS[0]} --clients "${CLIENTS[0]}" --duration "$S1" --prompt-len "$PROMPT" --output-len "$OUTPUT"
  load c${CLIENTS[1]} --clients "${CLIENTS[1]}" --duration "$S16" --prompt-len "$PROMPT" --output-len "$OUTPUT"
  load c${CLIENTS[2]} --clients "${CLIENTS[2]}" --duration "$S64" --prompt-len "$PROMPT" --output-len "$OUTPUT"
  load ttft --clients "${CLIENTS[1]}" --duration "$STTFT" --prompt-len "$TTFT_PROMPT" --output-len "$OUTPUT"
  stop_server "$cfg"
  # the engine offline on the same workload: as many requests as the MAXC-client run completed, MAXC at once
  n=$(python3 -c "import json; print(max(json.load(open('$OUT/$cfg.c$MAXC.json'))['completed'], $MAXC))" 2>/dev/null \
      || echo "$MAXC")
  echo "== $cfg: offline: lathe bench --concurrency $MAXC --requests $n"
  if ! (lathe bench --config "$cfg" --random-weights --target "$TARGET" --concurrency "$MAXC" --requests "$n" \
      --prompt-len "${PROMPT/:/-}" --gen-len "${OUTPUT/:/-}" --ctx "$CTX" "${kv_args[@]}" --json) \
      >"$OUT/$cfg.offline.json" 2>"$OUT/$cfg.offline.log"; then
    echo "$0: $cfg offline bench failed: $(tail -3 "$OUT/$cfg.offline.log")" >&2
    failed=1
  fi
  echo "== $cfg: done in $(( $(date +%s) - t0 )) s"
done

# the verified long runs: a batch-invariant server each, so that every answer must equal its reference exactly
for cfg in "${configs[@]}"; do
  [ "$LONG" = 0 ] && break
  t0=$(date +%s)
  start_server "$cfg" "$cfg.long" --batch-invariant || { failed=1; continue; }
  echo "== $cfg: batch-invariant server on port $PORT after $(( $(date +%s) - t0 )) s ($(head -1 "$OUT/$cfg.long.serve.log"))"
  load long --verify --pool "${SERVE_LONG_POOL:-$LONG_POOL}" --clients "$MAXC" --duration "$LONG" \
    --prompt-len "$PROMPT" --output-len "$OUTPUT"
  stop_server "$cfg"
  echo "== $cfg: long run done in $(( $(date +%s) - t0 )) s"
done

python3 - "$OUT" "$CONFIGS" "${CLIENTS[*]}" "$TTFT_PROMPT" "$LONG" "$TARGET" "$LONG_ONLY" <<'EOF' | tee "$FINAL/table.md"
import json, os, sys
out, configs, clients, ttft_prompt, long_s, target, long_only = sys.argv[1:]
def get(path):
    try:
        with open(os.path.join(out, path)) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None
rows, summary, verdicts = [], {"target": target, "configs": {}}, []
fmt = lambda v, p=1: "-" if v is None else ("%.*f" % (p, v))
print("\n| config | run | clients | requests (errors) | output tok/s | TTFT p50 / p99 ms | ITL p50 / p99 ms | served / offline |")
print("|---|---|---|---|---|---|---|---|")
for cfg in configs.split(","):
    off = get(cfg + ".offline.json")
    entry = summary["configs"][cfg] = {"offline": off}
    names = ([] if long_only == "1" else ["c" + c for c in clients.split()] + ["ttft"]) + (["long"] if long_s != "0" else [])
    for name in names:
        r = get("%s.%s.json" % (cfg, name))
        entry[name] = r
        if not r:
            print("| %s | %s | | missing | | | | |" % (cfg, name))
            continue
        ratio = r["output_tok_per_s"] / off["output_tok_s"] if off and off.get("output_tok_s") else None
        label = {"ttft": "%s-token prompts" % ttft_prompt,
                 "long": "long verified, batch-invariant (%s s)" % long_s}.get(name, "random")
        if name == "long":
            v = r.get("verify") or {}
            verdicts.append("%s long run: %d requests (%d streamed) at %d clients over %s s against %d references "
                            "taken alone: %d lost, %d truncated, %d mixed, %d mismatched (%d after equal first tokens), %d failed "
                            "references; %d equal but for a logprob drift%s" % (
                cfg, r["requests"], v.get("streamed", 0), r["clients"], long_s, v.get("pool", 0), r.get("lost", 0),
                r.get("truncated", 0), r.get("mixed", 0), r.get("mismatched", 0), r.get("mismatched_later", 0),
                v.get("reference_errors", 0), r.get("drift", 0),
                "".join("\n  " + e for e in r.get("first_errors", []) + r.get("first_drifts", [])[:2])))
        if name == "c" + clients.split()[-1]:
            entry["served_over_offline"] = ratio
        print("| %s | %s | %d | %d (%d) | %s | %s / %s | %s / %s | %s |" % (
            cfg, label, r["clients"], r["requests"], r["errors"], fmt(r["output_tok_per_s"]),
            fmt(r["ttft_ms_p50"]), fmt(r["ttft_ms_p99"]), fmt(r["itl_ms_p50"], 2), fmt(r["itl_ms_p99"], 2),
            fmt(ratio, 2) if name == "c" + clients.split()[-1] else ""))
    if off:
        print("| %s | offline (lathe bench) | %d | %d | %s | %s / %s | %s / %s | |" % (
            cfg, off["concurrency"], off["requests"], fmt(off["output_tok_s"]), fmt(off["ttft_ms_p50"]),
            fmt(off["ttft_ms_p99"]), fmt(off["itl_ms_p50"], 2), fmt(off["itl_ms_p99"], 2)))
for line in verdicts:
    print("\n" + line)
with open(os.path.join(out, "summary.json"), "w") as f:
    json.dump(summary, f, indent=2)
EOF
cp "$OUT/summary.json" "$FINAL/summary.json"
for f in "$OUT"/*.log "$OUT"/*.txt; do [ -f "$f" ] && { echo "== $(basename "$f")"; cat "$f"; }; done >"$FINAL/logs.txt"
echo "summary.json, table.md and logs.txt in $FINAL (the runs' files in $OUT); $(( $(date +%s) - t_start )) s in all"
exit $failed
