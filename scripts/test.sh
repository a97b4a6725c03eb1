#!/usr/bin/env bash
# Run the whole test suite (installs or updates ./.venv first). Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
export HF_HUB_OFFLINE=1
# kglite + torch + faiss in one process need a larger glibc static-TLS reserve (see tools/embeddings.py)
export GLIBC_TUNABLES="${GLIBC_TUNABLES:+$GLIBC_TUNABLES:}glibc.rtld.optional_static_tls=8192"
exec .venv/bin/python -m pytest "$@"
