#!/usr/bin/env bash
# Run the whole test suite (installs or updates ./.venv first). Extra arguments go to pytest.
# Tests run in parallel (pytest-xdist): RAGPLAN_TEST_WORKERS processes, default 3; 0 runs them in this process.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
# tests/test_html_report.py opens the HTML report in a real browser: headless Chromium (Debian's `chromium`).
# Where we can install it (root with apt-get, as in CI) we do, and the browser tests must then run (not skip).
if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  export RAGPLAN_CHROMIUM_EXPECTED=1
  if ! command -v chromium >/dev/null 2>&1; then
    echo "installing chromium for the HTML report's browser test (apt-get) ..." >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -qq chromium >/dev/null 2>&1 \
      || { apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq chromium >/dev/null 2>&1; } \
      || echo "warning: could not install chromium; tests/test_html_report.py's browser tests will fail" >&2
  fi
fi
export HF_HUB_OFFLINE=1
exec .venv/bin/python -m pytest -n "${RAGPLAN_TEST_WORKERS:-3}" --dist loadgroup "$@"
