#!/usr/bin/env bash
# Create .venv with Python 3.12 and install Recast.
#   bash infra/bootstrap.sh          # runtime (CPU onnxruntime), enough for the demo
#   bash infra/bootstrap.sh --test   # plus torch backend and test tools
set -euo pipefail
cd "$(dirname "$0")/.."

py=""
for cand in python3.12 python3; do
  if command -v "$cand" >/dev/null 2>&1 && "$cand" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 12))' 2>/dev/null; then
    py=$cand; break
  fi
done
if [ -z "$py" ] && command -v pyenv >/dev/null 2>&1; then
  ver=$(pyenv versions --bare 2>/dev/null | grep -E '^3\.12(\.|$)' | tail -n 1 || true)
  if [ -n "$ver" ]; then py="$(pyenv root)/versions/$ver/bin/python3.12"; fi
fi
[ -n "$py" ] || { echo "bootstrap: Python 3.12 not found" >&2; exit 1; }

extras="cpu"
if [ "${1:-}" = "--test" ]; then extras="cpu,torch,test"; fi

if [ ! -x .venv/bin/python ]; then "$py" -m venv .venv; fi
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e ".[${extras}]"
.venv/bin/python -m pip install -q --no-deps -r infra/requirements-nodeps.txt
# Something may still have pulled opencv-python beside the headless build.
if .venv/bin/python -m pip show -q opencv-python >/dev/null 2>&1; then
  .venv/bin/python -m pip uninstall -q -y opencv-python
  .venv/bin/python -m pip install -q --force-reinstall --no-deps opencv-python-headless
fi
echo "bootstrap: ready (.venv, extras: ${extras})"
