#!/usr/bin/env bash
# How the learned prior does on goldens it was not fitted on: for each goldens file of a target, fit on the
# others and gate the fitted prior against the held-out file; prints each file's figure and the total, beside
# the in-sample gate. A prior that only reproduces its own goldens shows it here.
#
#   bench/prior_holdout.sh [--lathe PATH] [--target cpu|cuda] [--reach N] [--l2 L] [--goldens DIR]
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
lathe=$root/build/lathe target=cpu reach=0 l2=1e-6 goldens=$root/goldens
while [ $# -gt 0 ]; do
  case $1 in
    --lathe) lathe=$2; shift 2 ;;
    --target) target=$2; shift 2 ;;
    --reach) reach=$2; shift 2 ;;
    --l2) l2=$2; shift 2 ;;
    --goldens) goldens=$2; shift 2 ;;
    *) echo "prior_holdout: unknown option '$1'" >&2; exit 2 ;;
  esac
done
work=$(mktemp -d) || exit 2
trap 'rm -rf "$work"' EXIT
files=()
for f in "$goldens"/*.json; do
  case $(basename "$f") in prior*) continue ;; esac
  grep -q "\"target\": \"$target\"" "$f" && files+=("$f")
done
[ ${#files[@]} -ge 2 ] || { echo "prior_holdout: fewer than two $target goldens files in $goldens" >&2; exit 2; }
fit() { "$lathe" fit --target "$target" --reach "$reach" --l2 "$l2" --from "$1" --out "$2" >/dev/null; }
passed=0 counted=0
for f in "${files[@]}"; do
  rm -rf "$work/others" && mkdir "$work/others"
  for g in "${files[@]}"; do [ "$g" = "$f" ] || cp "$g" "$work/others/"; done
  fit "$work/others" "$work/p.json" || { echo "prior_holdout: fit without $(basename "$f") failed" >&2; exit 1; }
  line=$("$lathe" fit --gate --prior "$work/p.json" --target "$target" --from "$f" 2>&1 | head -1)
  read -r p c < <(sed -n 's/.*for \([0-9]*\) of \([0-9]*\) kernels.*/\1 \2/p' <<<"$line")
  printf '%-44s %s\n' "$(basename "$f")" "${p:-0} of ${c:-0}"
  passed=$((passed + ${p:-0})) counted=$((counted + ${c:-0}))
done
fit "$goldens" "$work/all.json" || exit 1
inside=$("$lathe" fit --gate --prior "$work/all.json" --target "$target" --from "$goldens" | head -1)
echo "held out: $passed of $counted kernels in the measured best half (reach $reach, l2 $l2)"
echo "in sample: ${inside#prior gate: }"
