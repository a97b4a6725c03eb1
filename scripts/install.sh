#!/usr/bin/env bash
# Install ragplan and everything it needs into ./.venv (idempotent; fast when already installed).
# CPU torch is pinned first so nothing pulls the multi-GB CUDA wheels later (the embedding model).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip >/dev/null 2>&1 || true
.venv/bin/python -m pip install -q "torch==2.13.0" 2>&1 | grep -v "^WARNING: Location" || true
.venv/bin/python -m pip install -q -e ".[dev]" 2>&1 | grep -v "^WARNING: Location" || true
.venv/bin/python -c "import ragplan, langgraph, kglite" || { echo "install failed" >&2; exit 1; }
echo "ragplan installed in $(pwd)/.venv (activate with: source .venv/bin/activate)"
