#!/usr/bin/env bash
# Run the whole test suite (installs or updates ./.venv first). Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
export HF_HUB_OFFLINE=1
exec .venv/bin/python -m pytest "$@"
