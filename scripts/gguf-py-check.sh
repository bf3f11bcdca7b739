#!/usr/bin/env bash
# Checks a GGUF file with the PyPI `gguf` package (the reader llama.cpp's Python tools use): that its
# reader accepts the file and, given REF (the f32 values lathe dequantizes, every tensor in file
# order, concatenated), that gguf.quants.dequantize gives the same values bit for bit. The package goes
# into a venv under build/ (build/venv) on first use. Exit 0 ok, 1 a mismatch, 77 skipped (PyPI
# unreachable: the line says so).
#   scripts/gguf-py-check.sh FILE.gguf [REF.f32] [--expect-key KEY]...
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
venv=${LATHE_GGUF_VENV:-$root/build/venv}
if ! "$venv/bin/python" -c 'import gguf, numpy' 2>/dev/null; then
  mkdir -p "$(dirname "$venv")"
  if ! { python3 -m venv "$venv" && "$venv/bin/pip" install -q --disable-pip-version-check gguf numpy; } \
      >"$venv.log" 2>&1; then
    echo "skipped: cannot install the PyPI gguf package into $venv (PyPI unreachable? see $venv.log)"
    exit 77
  fi
fi
exec "$venv/bin/python" "$root/scripts/gguf_py_check.py" "$@"
