#!/usr/bin/env bash
# The serving benchmark of issue 17 in one run (an H200 by default): for each config, `lathe serve --config C
# --random-weights`, bench/serve_load.py's streaming clients at 1, 16 and 64 (random prompts of 128-512 token ids,
# 64-128 new tokens each with ignore_eos, so every answer must be exactly its max_tokens), 16 clients with
# 512-token prompts for the time to first token, optionally a long run at 64 clients; then the engine offline
# on the same workload (`lathe bench --concurrency 64`, as many requests as the 64-client run completed) for the
# served / offline ratio. Prints one table; $OUT (default: a new temporary directory) gets three files:
# summary.json (every run's serve_load.py summary and the offline bench's JSON), table.md and logs.txt (the
# servers' and benches' stderr); the per-run files and the compile cache stay in a work directory ($WORK).
# Needs python3 (standard library only) and nothing from the network.
#
#   bench/serve_h200.sh LATHE [--libs DIR] [--long SECONDS] [--configs C1,C2] [--target cuda|cpu] [--quick]
#
# --libs DIR: shared libraries lathe needs that the machine lacks (bench/carry_lathe.sh gathers them); only lathe
# gets them in LD_LIBRARY_PATH (with the CUDA toolkit's lib64, where NVRTC often is), python3 keeps its own.
# --quick: a smoke test on the CPU (smollm2-135m, clients 1/4/8, short prompts, outputs and runs: 20-30 s).
# Durations (seconds) can be changed with SERVE_S1, SERVE_S16, SERVE_S64, SERVE_STTFT.
set -u
here=$(cd "$(dirname "$0")" && pwd)
usage() {
  echo "usage: $0 LATHE [--libs DIR] [--long SECONDS] [--configs C1,C2] [--target cuda|cpu] [--quick]" >&2
  exit 2
}
[ $# -ge 1 ] || usage
LATHE=$1; shift
[ -x "$LATHE" ] || { echo "$0: $LATHE is not an executable" >&2; exit 2; }
CONFIGS=llama-3.2-1b,qwen3-8b TARGET=cuda LONG=0 QUICK=0 LIBS=
while [ $# -gt 0 ]; do
  case $1 in
    --long) LONG=${2:?}; shift 2 ;;
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
  CLIENTS=(1 4 8) PROMPT=8:24 OUTPUT=2:4 TTFT_PROMPT=32 CTX=128
  S1=${SERVE_S1:-1} S16=${SERVE_S16:-1} S64=${SERVE_S64:-2} STTFT=${SERVE_STTFT:-1}
else
  CLIENTS=(1 16 64) PROMPT=128:512 OUTPUT=64:128 TTFT_PROMPT=512 CTX=1024
  S1=${SERVE_S1:-10} S16=${SERVE_S16:-20} S64=${SERVE_S64:-25} STTFT=${SERVE_STTFT:-12}
fi
MAXC=${CLIENTS[2]}
FINAL=${OUT:-$(mktemp -d /tmp/lathe-serve-bench-XXXXXX)}
mkdir -p "$FINAL"
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

# start_server CONFIG: sets SPID and PORT once /health says 200 (0), or 1
start_server() {
  local log=$OUT/$1.serve.log
  (lathe serve --config "$1" --random-weights --target "$TARGET" --port 0 --max-seqs "$MAXC" --max-queue 1024 \
    --ctx "$CTX" --drain-s 5 -q) 2>"$log" &
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
  echo "$0: lathe serve --config $1 did not start: $(tail -3 "$log")" >&2
  kill "$SPID" 2>/dev/null
  return 1
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
  t0=$(date +%s)
  start_server "$cfg" || { failed=1; continue; }
  echo "== $cfg: serving on port $PORT after $(( $(date +%s) - t0 )) s ($(head -1 "$OUT/$cfg.serve.log"))"
  # warm-up, not recorded: every batch size from MAXC down once (modules, GEMM heuristics, step graphs)
  python3 "$here/serve_load.py" --port "$PORT" --clients "$MAXC" --requests "$MAXC" --prompt-len "$PROMPT" \
    --output-len "$OUTPUT" >"$OUT/$cfg.warmup.txt" 2>&1 || { echo "$0: $cfg warm-up failed:" >&2; cat "$OUT/$cfg.warmup.txt" >&2; }
  load c${CLIENTS[0]} --clients "${CLIENTS[0]}" --duration "$S1" --prompt-len "$PROMPT" --output-len "$OUTPUT"
  load c${CLIENTS[1]} --clients "${CLIENTS[1]}" --duration "$S16" --prompt-len "$PROMPT" --output-len "$OUTPUT"
  load c${CLIENTS[2]} --clients "${CLIENTS[2]}" --duration "$S64" --prompt-len "$PROMPT" --output-len "$OUTPUT"
  load ttft --clients "${CLIENTS[1]}" --duration "$STTFT" --prompt-len "$TTFT_PROMPT" --output-len "$OUTPUT"
  if [ "$LONG" != 0 ]; then
    load long --clients "$MAXC" --duration "$LONG" --prompt-len "$PROMPT" --output-len "$OUTPUT"
  fi
  # SIGTERM (a shell without job control starts background commands with SIGINT ignored); it drains and exits 0
  kill -TERM "$SPID"
  for _ in $(seq 120); do kill -0 "$SPID" 2>/dev/null || break; sleep 0.5; done
  if kill -0 "$SPID" 2>/dev/null; then
    echo "$0: lathe serve --config $cfg did not exit within 60 s of SIGTERM" >&2
    kill -KILL "$SPID"
    failed=1
  fi
  wait "$SPID" || { echo "$0: lathe serve --config $cfg exited $?: $(tail -3 "$OUT/$cfg.serve.log")" >&2; failed=1; }
  # the engine offline on the same workload: as many requests as the MAXC-client run completed, MAXC at once
  n=$(python3 -c "import json; print(max(json.load(open('$OUT/$cfg.c$MAXC.json'))['completed'], $MAXC))" 2>/dev/null \
      || echo "$MAXC")
  echo "== $cfg: offline: lathe bench --concurrency $MAXC --requests $n"
  if ! (lathe bench --config "$cfg" --random-weights --target "$TARGET" --concurrency "$MAXC" --requests "$n" \
      --prompt-len "${PROMPT/:/-}" --gen-len "${OUTPUT/:/-}" --ctx "$CTX" --json) >"$OUT/$cfg.offline.json" \
      2>"$OUT/$cfg.offline.log"; then
    echo "$0: $cfg offline bench failed: $(tail -3 "$OUT/$cfg.offline.log")" >&2
    failed=1
  fi
  echo "== $cfg: done in $(( $(date +%s) - t0 )) s"
done

python3 - "$OUT" "$CONFIGS" "${CLIENTS[*]}" "$TTFT_PROMPT" "$LONG" "$TARGET" <<'EOF' | tee "$FINAL/table.md"
import json, os, sys
out, configs, clients, ttft_prompt, long_s, target = sys.argv[1:]
def get(path):
    try:
        with open(os.path.join(out, path)) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None
rows, summary = [], {"target": target, "configs": {}}
fmt = lambda v, p=1: "-" if v is None else ("%.*f" % (p, v))
print("\n| config | run | clients | requests (errors) | output tok/s | TTFT p50 / p99 ms | ITL p50 / p99 ms | served / offline |")
print("|---|---|---|---|---|---|---|---|")
for cfg in configs.split(","):
    off = get(cfg + ".offline.json")
    entry = summary["configs"][cfg] = {"offline": off}
    names = ["c" + c for c in clients.split()] + ["ttft"] + (["long"] if long_s != "0" else [])
    for name in names:
        r = get("%s.%s.json" % (cfg, name))
        entry[name] = r
        if not r:
            print("| %s | %s | | missing | | | | |" % (cfg, name))
            continue
        ratio = r["output_tok_per_s"] / off["output_tok_s"] if off and off.get("output_tok_s") else None
        label = {"ttft": "%s-token prompts" % ttft_prompt, "long": "long (%s s)" % long_s}.get(name, "random")
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
with open(os.path.join(out, "summary.json"), "w") as f:
    json.dump(summary, f, indent=2)
EOF
cp "$OUT/summary.json" "$FINAL/summary.json"
for f in "$OUT"/*.log "$OUT"/*.txt; do [ -f "$f" ] && { echo "== $(basename "$f")"; cat "$f"; }; done >"$FINAL/logs.txt"
echo "summary.json, table.md and logs.txt in $FINAL (the runs' files in $OUT); $(( $(date +%s) - t_start )) s in all"
exit $failed
