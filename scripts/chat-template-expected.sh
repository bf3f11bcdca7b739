#!/usr/bin/env bash
# Regenerates tests/fixtures/chat_templates/*.expected.json with Python's jinja2 (PyPI, into a venv under
# build/, as scripts/gguf-py-check.sh installs gguf). The outputs are committed: `make test` only reads them.
#   scripts/chat-template-expected.sh [FIXTURE_DIR]
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
venv=${LATHE_JINJA_VENV:-$root/build/venv-jinja}
if ! "$venv/bin/python" -c 'import jinja2' 2>/dev/null; then
  mkdir -p "$(dirname "$venv")"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check 'jinja2==3.1.*'
fi
exec "$venv/bin/python" "$root/scripts/chat_template_expected.py" "$@"
