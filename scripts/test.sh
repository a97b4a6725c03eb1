#!/usr/bin/env bash
# Run the whole test suite (installs or updates ./.venv first). Extra arguments go to pytest.
# Tests run in parallel (pytest-xdist): RAGPLAN_TEST_WORKERS processes, default 4 (on 2 cores too:
# a test often waits on a server or a subprocess); 0 runs them in this process.
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
# tests/test_postgres_checkpoints.py keep checkpoints in PostgreSQL: where we can (root with apt-get, as in CI) we
# install Debian's server and start a throwaway cluster on 127.0.0.1 (reused by the next run), and those tests must then
# run (not skip). RAGPLAN_TEST_POSTGRES=postgresql://… given by the caller is used as it is.
if [ -z "${RAGPLAN_TEST_POSTGRES:-}" ] && command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  export RAGPLAN_POSTGRES_EXPECTED=1
  if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
    echo "installing postgresql for the PostgreSQL checkpoint tests (apt-get) ..." >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -qq postgresql >/dev/null 2>&1 \
      || { apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq postgresql >/dev/null 2>&1; } \
      || echo "warning: could not install postgresql; tests/test_postgres_checkpoints.py will fail" >&2
  fi
  PGBIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1 || true)
  PGDIR=/tmp/ragplan-test-postgres
  if [ -n "$PGBIN" ] && ! runuser -u postgres -- "$PGBIN/pg_ctl" -D "$PGDIR/data" status >/dev/null 2>&1; then
    rm -rf "$PGDIR" && mkdir -p "$PGDIR" && chown postgres "$PGDIR"
    .venv/bin/python -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])' >"$PGDIR/port"
    runuser -u postgres -- "$PGBIN/initdb" -D "$PGDIR/data" -A trust -U postgres >"$PGDIR/initdb.log" 2>&1 \
      && runuser -u postgres -- "$PGBIN/pg_ctl" -D "$PGDIR/data" -l "$PGDIR/server.log" -w start \
           -o "-h 127.0.0.1 -p $(cat "$PGDIR/port") -k $PGDIR" >/dev/null \
      || echo "warning: could not start PostgreSQL (see $PGDIR/*.log); tests/test_postgres_checkpoints.py will fail" >&2
  fi
  if [ -f "$PGDIR/port" ]; then
    export RAGPLAN_TEST_POSTGRES="postgresql://postgres@127.0.0.1:$(cat "$PGDIR/port")/postgres"
  fi
fi
export HF_HUB_OFFLINE=1
unset PYTHONDONTWRITEBYTECODE  # (bytecode caches: else every worker compiles and rewrites the same modules again)
exec .venv/bin/python -m pytest -n "${RAGPLAN_TEST_WORKERS:-4}" --dist loadfile --no-loadscope-reorder "$@"
