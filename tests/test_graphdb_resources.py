"""Resource attacks: hostile Cypher must not crash, hang or exhaust the process running the graph-DB tool.

Each attack goes through the ``graph_db`` tool's query path (:func:`run_graph_query`) against one
embedded store over a small but well-connected graph made here (30 nodes, 120 relationships, so
cartesian products and path expansions really blow up). Every attack must

* end, either by simply running or stopped by the product's own limit (the statement check's caps,
  the worker's time, memory or result budget, or the engine's guards), which its observation names,
* keep the worker process under 1.5 GB and the test process's own growth small,
* leave this process alive and the store answering a normal query afterwards,
* and, unless it simply ran, come back as an observation that says why it did not.

The first group is refused by the statement check's caps before any engine sees it; the rest run
and are stopped by the worker's budgets (time, memory, result size) or by the engine's own guards.

No assertion here reads a clock against a performance bound (figures belong to benchmarks/): what is "fast" or
"linear" is shown by the limit that stopped a query, or by counting the work done, and a clock only bounds a hang
(``HANG_S``, far above any budget). Memory peaks are read from the worker's and this process's own ``VmHWM``, which
other processes on the machine do not change, so the tests run beside others (no ``serial`` mark).
"""

from __future__ import annotations

import os
import re
import threading
import time
from typing import Any

import pytest

from ragplan.tools.graphdb import (
    EmbeddedGraphStore,
    QueryError,
    QueryRefused,
    QueryTimeout,
    check_read_only,
    run_graph_query,
)
from ragplan.tools.graphdb import readonly
from ragplan.tools.graphdb.readonly import QueryCaps
from ragplan.tools.graphdb.sandbox import SandboxSettings

TIMEOUT_S = 2.0
HANG_S = 60.0
"""A bound on how long a call may take before the test calls it a hang: far above every budget here, so only a
query or check that never ends (or is many times slower than its budget) reaches it, however loaded the machine."""
GB = 1 << 30
N = 30


def graph_script() -> str:
    """30 nodes on a ring with chords (each node has 4 outgoing relationships), two labels."""
    lines = [f'CREATE (:{"City" if i % 2 else "Port"} {{name: "n{i}", i: {i}}});' for i in range(N)]
    for i in range(N):
        for d in (1, 2, 5, 7):
            lines.append(f"MATCH (a {{i: {i}}}), (b {{i: {(i + d) % N}}}) CREATE (a)-[:ROAD {{km: {d * 10}}}]->(b);")
    return "\n".join(lines)


def nested_call(n: int) -> str:
    return "CALL { " * n + "RETURN 1 AS x" + " } RETURN x" * n


# (id, query, what the observation must say when the query does not simply run: a regex)
# Refused by the caps before the engine sees them (the first two crash kglite with a segfault):
CAPPED: list[tuple[str, str, str]] = [
    ("call-nested-400", nested_call(400), r"subqueries .* at most 8"),
    ("call-nested-400-unclosed", "CALL { " * 400 + "RETURN 1 AS x" + " }" * 400 + " RETURN x", r"at most 8"),
    ("call-scoped-nested-20", "MATCH (n) " + "CALL (n) { " * 20 + "RETURN 1 AS x" + " } RETURN x" * 20, r"at most 8"),
    ("exists-nested-100", "MATCH (a) WHERE " + "EXISTS { MATCH (b) WHERE " * 100 + "true" + " }" * 100 + " RETURN a", r"at most 8"),
    ("union-600", " UNION ".join(f"RETURN {i} AS x" for i in range(600)), r"UNION .* at most 32"),
    ("union-all-100", " UNION ALL ".join(f"MATCH (n {{i: {i % N}}}) RETURN n.name AS x" for i in range(100)), r"at most 32"),
    ("parentheses-5000", "RETURN " + "(" * 5000 + "1" + ")" * 5000 + " AS x", r"brackets .* at most 40"),
    ("list-literal-1000", "RETURN " + "[" * 1000 + "1" + "]" * 1000 + " AS x", r"at most 40"),
    ("map-literal-200", "RETURN " + "{a: " * 200 + "1" + "}" * 200 + " AS x", r"at most 40"),
    ("list-comprehension-100", "RETURN " + "[x IN " * 100 + "[1]" + " | x]" * 100 + " AS x", r"at most 40"),
    ("huge-query-1mb", "MATCH (n) RETURN " + ", ".join(f"n.p{i}" for i in range(120_000)), r"characters long; at most 50,000"),
    ("huge-literal-1mb", "RETURN '" + "x" * 1_000_000 + "' AS s", r"characters long"),
    ("huge-in-list", "MATCH (n) WHERE n.name IN [" + ", ".join(f"'c{i}'" for i in range(60_000)) + "] RETURN n", r"characters long"),
]
# Run in the worker and stopped by its budgets or by the engine's own guards:
RUNTIME: list[tuple[str, str, str]] = [
    ("reduce-string-doubling", "RETURN reduce(s = 'ab', i IN range(1, 40) | s + s) AS s", r"memory budget|larger than|time budget"),
    ("reduce-string-doubling-size", "RETURN size(reduce(s = 'ab', i IN range(1, 40) | s + s)) AS n", r"memory budget|time budget"),
    ("reduce-string-tripling", "RETURN size(reduce(s = 'x', i IN range(1, 30) | s + s + s)) AS n", r"memory budget|time budget"),
    ("reduce-string-repeat", "RETURN size(reduce(s = '', i IN range(1, 1000000) | s + 'xxxxxxxxxxxxxxxx')) AS n", r"time budget|memory budget"),
    ("reduce-list-nesting", "RETURN reduce(acc = [], i IN range(1, 1000) | [acc]) AS x", r"more than 64 levels deep|crashed"),
    ("reduce-list-nesting-size", "RETURN size(reduce(acc = [], i IN range(1, 100000) | [acc])) AS x", r"time budget|memory budget|crashed"),
    ("reduce-list-self-append", "RETURN size(reduce(acc = [0], i IN range(1, 64) | acc + acc)) AS n", r"memory budget|time budget"),
    ("reduce-list-quadratic", "RETURN size(reduce(l = [], i IN range(1, 1000000) | l + [i])) AS n", r"time budget|memory budget"),
    ("unwind-range-1e9", "UNWIND range(1, 1000000000) AS x RETURN count(x) AS c", r"safety limit|memory budget|time budget"),
    ("range-size-1e9", "RETURN size(range(1, 1000000000)) AS c", r"safety limit|memory budget|time budget"),
    ("unwind-range-squared", "UNWIND range(1, 100000) AS a UNWIND range(1, 100000) AS b RETURN count(*) AS c", r"time budget|memory budget"),
    ("list-comprehension-1e7", "RETURN size([x IN range(1, 7000000) | [x, x, x, x]]) AS n", r"memory budget|time budget|safety limit"),
    ("range-to-string", "RETURN size(toString(range(1, 7000000))) AS n", r"memory budget|time budget|safety limit"),
    ("cartesian-7", "MATCH (a), (b), (c), (d), (e), (f), (g) RETURN count(*) AS c", r"time budget|memory budget"),
    ("cartesian-5-rows", "MATCH (a), (b), (c), (d), (e) RETURN a, b, c, d, e", r"time budget|memory budget"),
    ("cartesian-order-by", "MATCH (a), (b), (c), (d), (e), (f) RETURN a.i + b.i + c.i AS x ORDER BY x DESC LIMIT 1", r"time budget|memory budget"),
    ("cartesian-distinct", "MATCH (a), (b), (c), (d), (e), (f) RETURN DISTINCT [a.i, b.i, c.i, d.i, e.i, f.i] AS k", r"time budget|memory budget"),
    ("var-length-1-30", "MATCH p = (a)-[*1..30]-(b) RETURN count(p) AS c", r"time budget|memory budget"),
    ("var-length-unbounded", "MATCH p = (a)-[*]->(b) RETURN count(p) AS c", r"time budget|memory budget"),
    ("var-length-collect", "MATCH p = (a)-[*1..10]->(b) RETURN collect(p) AS paths", r"time budget|memory budget|larger than"),
    ("collect-cartesian", "MATCH (a), (b), (c), (d) WITH collect([a, b, c, d]) AS l RETURN size(l) AS c", r"memory budget|time budget"),
    ("collect-strings", "MATCH (a), (b), (c), (d), (e) RETURN size(collect(a.name + b.name + c.name + d.name + e.name)) AS c", r"memory budget|time budget"),
    ("replace-blowup", "RETURN size(replace(reduce(s = 'a', i IN range(1, 27) | s + s), 'a', 'aaaaaaaaaaaaaaaa')) AS n", r"memory budget|time budget"),
    ("big-result-string", "RETURN reduce(s = 'ab', i IN range(1, 24) | s + s) AS s", r"larger than 16 MB|memory budget|time budget"),
]
ATTACKS = CAPPED + RUNTIME
assert len(ATTACKS) >= 30


def hwm_bytes(pid: int | str) -> int:
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def reset_hwm(pid: int | str) -> None:
    try:
        with open(f"/proc/{pid}/clear_refs", "w") as fh:
            fh.write("5")  # reset the peak resident size to the current one
    except OSError:
        pass


class PeakSampler:
    """Samples the peak resident size of a pool's workers every few milliseconds while in use."""

    def __init__(self, pool: Any) -> None:
        self.pool, self.peak = pool, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(0.005):
            for pid in self.pool.worker_pids():
                self.peak = max(self.peak, hwm_bytes(pid))

    def __enter__(self) -> "PeakSampler":
        for pid in self.pool.worker_pids():
            reset_hwm(pid)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        for pid in self.pool.worker_pids():
            self.peak = max(self.peak, hwm_bytes(pid))


@pytest.fixture(scope="module")
def store() -> Any:
    """The attack graph in an embedded store with the default sandbox budgets (512 MB, 1 s grace)."""
    s = EmbeddedGraphStore.from_text(graph_script(), source="attack.cql")
    s.sandbox.warm_up()
    yield s
    s.close()


@pytest.mark.parametrize(("query", "why"), [pytest.param(q, w, id=i) for i, q, w in ATTACKS])
def test_attack_is_contained(store: EmbeddedGraphStore, record_property: Any, query: str, why: str) -> None:
    """One attack: contained within its time and memory budgets (its costs recorded as test properties)."""
    pool = store.sandbox
    assert pool is not None
    reset_hwm("self")
    exits_before = list(pool.exits)
    self_before = hwm_bytes("self")
    with PeakSampler(pool) as sampler:
        t0 = time.monotonic()
        out = run_graph_query(store, query, row_cap=100, timeout_s=TIMEOUT_S)
        elapsed = time.monotonic() - t0
    ended = [e for e in pool.exits if all(e is not b for b in exits_before)]
    worker_peak = max([sampler.peak] + [e.peak_rss_bytes for e in ended])
    self_growth = hwm_bytes("self") - self_before
    record_property("elapsed_s", round(elapsed, 3))
    record_property("worker_peak_mb", worker_peak >> 20)

    assert elapsed < HANG_S, f"took {elapsed:.1f} s"  # (a hang; that the budget stopped it is the observation's word)
    assert worker_peak < 1.5 * GB, f"worker peaked at {worker_peak / GB:.2f} GB"
    assert self_growth < 256 << 20, f"the test process grew by {self_growth >> 20} MB"
    if not out.ok:
        assert out.error_kind in ("refused", "timeout", "error")
        assert re.search(why, out.observation), out.observation
        if out.error_kind == "timeout":  # stopped by this query's own budget, not a longer default
            assert f"past the {TIMEOUT_S:g} s time budget" in out.observation, out.observation
    after = run_graph_query(store, "MATCH (n) RETURN count(n) AS c", row_cap=10, timeout_s=TIMEOUT_S)
    assert after.ok and after.observation.splitlines()[1] == str(N), after.observation


class _Untouchable:
    """Stands in for a pass of the statement check that must not run."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __getattr__(self, attr: str) -> Any:
        raise AssertionError(f"{self.name}.{attr} was used")

    def __call__(self, *a: Any, **k: Any) -> Any:
        raise AssertionError(f"{self.name} was called")


class _CountingPattern:
    """A compiled regex of the check that counts the characters it is handed to scan."""

    def __init__(self, pattern: re.Pattern[str], count: "CheckCost") -> None:
        self.pattern, self.cost = pattern, count

    def match(self, string: str, pos: int = 0, *rest: Any) -> Any:
        m = self.pattern.match(string, pos, *rest)
        self.cost.count += (m.end() if m else pos) - pos + 1  # an anchored match reads what it matched
        return m

    def _whole(self, method: str, string: str, *rest: Any) -> Any:
        self.cost.count += len(string) + 1
        return getattr(self.pattern, method)(string, *rest)

    def finditer(self, string: str, *rest: Any) -> Any:
        return self._whole("finditer", string, *rest)

    def search(self, string: str, *rest: Any) -> Any:
        return self._whole("search", string, *rest)

    def sub(self, repl: Any, string: str, *rest: Any) -> Any:
        self.cost.count += len(string) + 1
        return self.pattern.sub(repl, string, *rest)


class _CountingRe:
    """The ``re`` module as the check sees it, counting the characters its functions are handed."""

    def __init__(self, count: "CheckCost") -> None:
        self.cost = count

    def __getattr__(self, name: str) -> Any:
        return getattr(re, name)

    def _counted(self, name: str, pattern: Any, *args: Any, **kw: Any) -> Any:
        self.cost.count += len(args[1] if name == "sub" else args[0]) + 1  # (sub: repl, string)
        return getattr(re, name)(pattern, *args, **kw)

    def sub(self, pattern: Any, repl: Any, string: str, *a: Any, **k: Any) -> Any:
        return self._counted("sub", pattern, repl, string, *a, **k)

    def match(self, pattern: Any, string: str, *a: Any, **k: Any) -> Any:
        return self._counted("match", pattern, string, *a, **k)

    def search(self, pattern: Any, string: str, *a: Any, **k: Any) -> Any:
        return self._counted("search", pattern, string, *a, **k)


class CheckCost:
    """The work :func:`check_read_only` does on a query, counted rather than timed: each line of the check's module
    run, plus the characters handed to each of its regexes (module patterns and ``re`` functions) and to each string
    method it calls (``s.rstrip()`` on a slice counts the slice). A pass over the whole text per word shows as a count
    that grows with the square of the length, whatever the machine's load."""

    PATTERNS = ("_SPAN", "_WORD", "_IDENT_RUN", "_SPACE", "_BRACKET", "_NEWLINES", "_PROCEDURE_NAME")

    def __init__(self, caps: QueryCaps | None = None) -> None:
        self.caps, self.count = caps, 0

    def run(self, query: str) -> str:
        import sys

        saved = {name: getattr(readonly, name) for name in (*self.PATTERNS, "re")}
        for name, value in saved.items():
            setattr(readonly, name, _CountingRe(self) if name == "re" else _CountingPattern(value, self))
        module_file = readonly.__file__

        def lines(frame: Any, event: str, arg: Any) -> Any:
            if event == "line":
                self.count += 1
            return lines

        def calls(frame: Any, event: str, arg: Any) -> Any:
            return lines if frame.f_code.co_filename == module_file else None

        def c_calls(frame: Any, event: str, arg: Any) -> None:
            if event == "c_call" and isinstance(getattr(arg, "__self__", None), str):
                self.count += len(arg.__self__) + 1

        old_trace, old_profile = sys.gettrace(), sys.getprofile()
        sys.settrace(calls)
        sys.setprofile(c_calls)
        try:
            return check_read_only(query, self.caps) if self.caps else check_read_only(query)
        finally:
            sys.settrace(old_trace)
            sys.setprofile(old_profile)
            for name, value in saved.items():
                setattr(readonly, name, value)


class TestCapsAndCheck:
    """The statement check's caps: what passes, what is refused, and that the check is linear."""

    def test_typical_queries_pass(self) -> None:
        for q in [
            nested_call(8),
            " UNION ".join(f"RETURN {i} AS x" for i in range(32)),
            "RETURN " + "[" * 40 + "1" + "]" * 40 + " AS x",
            "MATCH (t) CALL (t) { MATCH (c)-[:R]->(t) RETURN count(c) AS k } RETURN t.name, k",
            "MATCH (n) WHERE n.name = '" + "(" * 200 + "' RETURN n",  # brackets in strings do not count
        ]:
            assert check_read_only(q)

    @pytest.mark.parametrize(
        ("query", "message"),
        [
            (nested_call(9), "at most 8"),
            (" UNION ".join(f"RETURN {i} AS x" for i in range(33)), "at most 32"),
            ("RETURN " + "[" * 41 + "1" + "]" * 41 + " AS x", "at most 40"),
            ("MATCH (n) RETURN n" + " " * 50_000, "at most 50,000"),
        ],
    )
    def test_refused_with_the_cap_named(self, query: str, message: str) -> None:
        with pytest.raises(QueryRefused, match=message):
            check_read_only(query)

    def test_caps_are_settings(self) -> None:
        caps = QueryCaps(max_chars=100, max_depth=2, max_subquery_depth=1, max_union_arms=2)
        with pytest.raises(QueryRefused, match="at most 100"):
            check_read_only("RETURN 1 AS x" + " " * 100, caps)
        with pytest.raises(QueryRefused, match="at most 2 levels"):
            check_read_only("RETURN [[[1]]] AS x", caps)
        with pytest.raises(QueryRefused, match="at most 1 are"):
            check_read_only(nested_call(2), caps)
        with pytest.raises(QueryRefused, match="at most 2 are"):
            check_read_only("RETURN 1 AS x UNION RETURN 2 AS x UNION RETURN 3 AS x", caps)

    def test_a_1mb_query_is_refused_at_once(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """The length is looked at before anything else: no pass over the text (newlines, literals, words, brackets)
        runs, and the refusal costs a few counted steps, not a number that grows with the text."""
        q = "MATCH (n) RETURN " + ", ".join(f"n.p{i}" for i in range(120_000))
        for name in ("_NEWLINES", "_SPAN", "_WORD", "_IDENT_RUN", "_BRACKET", "_replace_spans", "_check_nesting"):
            monkeypatch.setattr(readonly, name, _Untouchable(name))
        with pytest.raises(QueryRefused, match="characters long"):
            check_read_only(q)
        monkeypatch.undo()
        steps = CheckCost()
        with pytest.raises(QueryRefused, match="characters long"):
            steps.run(q)
        assert steps.count < 100, steps.count

    @pytest.mark.parametrize(
        "make",
        [
            lambda n: "MATCH (n) RETURN " + ", ".join(f"n.p{i}" for i in range(n // 8)),
            lambda n: "MATCH (n) RETURN n" + ". a" * (n // 3),  # a long dotted chain
            lambda n: "MATCH (n) RETURN " + "'a' + " * (n // 6) + "1",  # many strings
            lambda n: "MATCH (n) RETURN 1 AS x" + " " * n,  # one long gap
            lambda n: "RETURN " + "CALL(" * (n // 5),
        ],
        ids=["names", "dotted-chain", "strings", "whitespace", "brackets"],
    )
    def test_check_is_linear(self, make: Any) -> None:
        """Checking ten times more text costs about ten times more (the old check was quadratic: 100 times). The cost
        is counted, not timed (:class:`CheckCost`: lines run plus characters each regex or string method is handed),
        so a check that slices from the start of the text for every word counts 100 times more, however loaded the
        machine; and no character costs more than a bounded number of steps."""
        caps = QueryCaps(max_chars=10**8, max_depth=10**8, max_subquery_depth=10**8, max_union_arms=10**8)

        def cost(n: int) -> tuple[int, int]:
            q, steps = make(n), CheckCost(caps)
            steps.run(q)
            return steps.count, len(q)

        (small, _), (large, chars) = cost(5_000), cost(50_000)
        assert large < 40 * small, f"5 KB: {small:,} steps, 50 KB: {large:,} steps"
        assert large < 50 * chars, f"{large:,} steps for {chars:,} characters"

    @pytest.mark.parametrize(
        "query",
        ["MATCH (n) RETURN 'unterminated" + "\\'" * 200_000, "MATCH (n) RETURN 1 /*" + " /*" * 200_000],
        ids=["string", "comment"],
    )
    def test_unterminated_literals_are_refused_fast(self, query: str) -> None:
        """The text is scanned once: the check hands each pass the text once (counted), and the one regex that reads
        literals does not rescan the rest of the text from every quote (which, at 400,000 characters, would take
        minutes: the hang bound; the linear scan takes milliseconds)."""
        caps = QueryCaps(max_chars=10**8)
        t0 = time.monotonic()
        with pytest.raises(QueryRefused, match="unterminated"):
            check_read_only(query, caps)
        assert time.monotonic() - t0 < HANG_S / 3
        steps = CheckCost(caps)
        with pytest.raises(QueryRefused, match="unterminated"):
            steps.run(query)
        assert steps.count < 5 * len(query), f"{steps.count:,} steps for {len(query):,} characters"


class TestSandbox:
    """The worker pool itself: restarts, messages, concurrency and the in-process fallback."""

    def test_crash_restart_and_message(self, store: EmbeddedGraphStore) -> None:
        """A segfault past the check (caps lifted on a copy of the store) costs that query only."""
        pool = store.sandbox
        before = pool.worker_pids()
        with pytest.raises(QueryError, match="crashed the query engine") as err:
            pool.run(" UNION ".join(f"RETURN {i} AS x" for i in range(600)), row_cap=10, timeout_s=TIMEOUT_S)
        assert not isinstance(err.value, QueryTimeout)
        assert pool.exits[-1].reason == "crash"
        assert store.query("MATCH (n) RETURN count(n) AS c").rows == [{"c": N}]
        assert pool.worker_pids() != before

    def test_hard_timeout_kills_and_restarts(self) -> None:
        """The engine does not stop this query itself: the pool kills its worker at the budget + grace (the exit's
        reason says so) and the next query gets a fresh one."""
        s = EmbeddedGraphStore.from_text(graph_script(), sandbox=SandboxSettings(grace_s=0.3, max_workers=1))
        try:
            t0 = time.monotonic()
            with pytest.raises(QueryTimeout, match=r"ran past the 0.5 s time budget and was stopped"):
                s.query("RETURN size(reduce(acc = [], i IN range(1, 100000) | [acc])) AS x", timeout_s=0.5)
            assert time.monotonic() - t0 < HANG_S
            assert s.sandbox.exits[-1].reason == "timeout"
            assert s.query("MATCH (n:Port) RETURN count(n) AS c").rows == [{"c": N // 2}]
        finally:
            s.close()

    def test_memory_budget_is_a_setting(self) -> None:
        s = EmbeddedGraphStore.from_text(graph_script(), sandbox=SandboxSettings(memory_budget_mb=256))
        try:
            with pytest.raises(QueryError, match="exceeded the 256 MB memory budget"):
                s.query("RETURN size(reduce(s = 'ab', i IN range(1, 40) | s + s)) AS n", timeout_s=10)
            assert s.sandbox.exits[-1].peak_rss_bytes < 512 << 20
            assert s.query("RETURN 1 AS one").rows == [{"one": 1}]
        finally:
            s.close()

    def test_concurrent_queries(self, store: EmbeddedGraphStore) -> None:
        """Threads share the pool: normal queries all answer while one attack runs into its budget."""
        results: dict[int, Any] = {}

        def ask(k: int) -> None:
            q = "MATCH (a), (b), (c), (d), (e), (f), (g) RETURN count(*) AS c" if k == 0 else f"MATCH (n {{i: {k}}}) RETURN n.name AS name"
            results[k] = run_graph_query(store, q, row_cap=10, timeout_s=TIMEOUT_S)

        threads = [threading.Thread(target=ask, args=(k,)) for k in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=30)
        assert not results[0].ok and results[0].error_kind in ("timeout", "error")
        for k in range(1, 8):
            assert results[k].ok and results[k].observation == f"name\nn{k}"
        assert len(store.sandbox.worker_pids()) <= store.sandbox.settings.max_workers

    def test_close_stops_workers(self) -> None:
        s = EmbeddedGraphStore.from_text(graph_script())
        assert s.query("RETURN 1 AS one").rows == [{"one": 1}]
        pids, graph = s.sandbox.worker_pids(), s.sandbox._graph
        assert pids and not graph.closed
        s.close()
        for pid in pids:
            assert not os.path.exists(f"/proc/{pid}")  # killed and reaped
        assert graph.closed
        with pytest.raises(QueryError, match="closed"):
            s.query("RETURN 1 AS one")

    def test_garbage_collected_store_stops_workers(self) -> None:
        import gc

        s = EmbeddedGraphStore.from_text(graph_script())
        s.query("RETURN 1 AS one")
        pids = s.sandbox.worker_pids()
        del s
        gc.collect()
        for pid in pids:
            assert not os.path.exists(f"/proc/{pid}")

    def test_bad_statement_stops_the_loading_worker(self) -> None:
        """The script loads in a worker: a failing statement is a ScriptError with its line, and no worker is left."""
        from ragplan.tools.graphdb import ScriptError

        before = worker_children()  # this process's own (other processes on the machine may run workers too)
        with pytest.raises(ScriptError, match=r"^bad\.cql:2: ") as err:
            EmbeddedGraphStore.from_text("CREATE (a:X {i: 1});\nCREATE (b:X {i: });\n", source="bad.cql")
        assert (err.value.line, err.value.statement) == (2, "CREATE (b:X {i: })")
        assert worker_children() - before == set()

    def test_restarted_worker_loads_the_saved_graph(self) -> None:
        """Workers after the first start from the loaded graph the first one left, not from the script."""
        s = EmbeddedGraphStore.from_text(graph_script(), sandbox=SandboxSettings(max_workers=1))
        try:
            assert os.pread(s.sandbox._graph.fileno(), 1, 0) != b"["  # the statements were replaced by the graph
            for pid in s.sandbox.worker_pids():
                os.kill(pid, 9)
            time.sleep(0.1)
            assert s.query("MATCH (n:Port) RETURN count(n) AS c").rows == [{"c": N // 2}]
        finally:
            s.close()


def test_recursion_error_never_leaves_the_tool(monkeypatch: pytest.MonkeyPatch, store: EmbeddedGraphStore) -> None:
    """Any exception from the check or the engine is an observation, not a crash of the caller."""
    import ragplan.tools.graphdb.store as store_mod

    def boom(*a: Any, **k: Any) -> str:
        raise RecursionError("maximum recursion depth exceeded")

    monkeypatch.setattr(store_mod, "check_read_only", boom)
    out = run_graph_query(store, "MATCH (n) RETURN n", row_cap=10, timeout_s=5)
    assert not out.ok and out.error_kind == "error" and "could not read this query" in out.observation
    monkeypatch.undo()
    monkeypatch.setattr(type(store), "_run_read", lambda *a, **k: (_ for _ in ()).throw(OSError("pipe gone")))
    out = run_graph_query(store, "MATCH (n) RETURN n", row_cap=10, timeout_s=5)
    assert not out.ok and out.error_kind == "error" and "pipe gone" in out.observation



def test_observation_is_cut(store: EmbeddedGraphStore) -> None:
    """A result just under the size budget still reaches the LLM as a bounded observation."""
    from ragplan.tools.graphdb.tool import OBSERVATION_CHARS

    out = run_graph_query(store, "RETURN reduce(s = 'ab', i IN range(1, 18) | s + s) AS s", row_cap=10, timeout_s=TIMEOUT_S)
    assert out.ok and len(out.observation) < OBSERVATION_CHARS + 200
    assert out.observation.endswith("characters: return fewer or shorter values)")


def test_a_result_of_too_many_values_is_refused_naming_the_bound(store: EmbeddedGraphStore) -> None:
    """Rows within a raised row cap but more values than a worker may return: a query error that names the bound."""
    t0 = time.monotonic()
    out = run_graph_query(store, "UNWIND range(1, 150000) AS x RETURN x", row_cap=200_000, timeout_s=TIMEOUT_S)
    assert time.monotonic() - t0 < HANG_S
    assert not out.ok and out.error_kind == "error" and "more than 100,000 values" in out.observation, out.observation
    ok = run_graph_query(store, "UNWIND range(1, 1000) AS x RETURN x", row_cap=1000, timeout_s=TIMEOUT_S)
    assert ok.ok and ok.row_count == 1000


def test_formatting_a_large_result_stops_at_the_observation_size(store: EmbeddedGraphStore,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """The caller's formatting is bounded by what the LLM can see, not by the result's size (which used to cost
    seconds past the query's time budget for a list of a million empty maps): counted as the values it formats."""
    from ragplan.tools.graphdb import format_rows, schema
    from ragplan.tools.graphdb.tool import OBSERVATION_CHARS

    formatted = [0]
    format_value = schema.format_value

    def counted(*a: Any, **k: Any) -> str:
        formatted[0] += 1
        return format_value(*a, **k)

    monkeypatch.setattr(schema, "format_value", counted)  # (its recursion reads the module's name too)
    text = format_rows(["l", "m"], [{"l": [{}] * 1_000_000, "m": {f"k{i}": i for i in range(100_000)}}] * 50, 50, True, 1000)
    assert len(text) < 2500 and "…" in text
    assert formatted[0] < 2_000, f"{formatted[0]:,} values formatted of 55,000,000"
    formatted[0] = 0
    t0 = time.monotonic()
    out = run_graph_query(store, "RETURN [x IN range(1, 99000) | {}] AS l", row_cap=10, timeout_s=TIMEOUT_S + 3)
    assert time.monotonic() - t0 < HANG_S
    assert out.ok and len(out.observation) < OBSERVATION_CHARS + 200, out.observation[-200:]
    assert 0 < formatted[0] < 99_000 // 2, f"{formatted[0]:,} values formatted of 99,000"


NEO4J_URI = os.environ.get("NEO4J_URI", "")


def test_neo4j_store_applies_the_caps_before_connecting() -> None:
    """The caps are part of the statement check, so Neo4j gets them without a server round trip."""
    from ragplan.tools.graphdb import Neo4jGraphStore

    neo = Neo4jGraphStore("bolt://127.0.0.1:9", "neo4j", "unused", connection_timeout_s=0.5)
    try:
        for _, query, why in CAPPED:
            with pytest.raises(QueryRefused, match=why):
                neo.query(query)
    finally:
        neo.close()


@pytest.mark.neo4j
@pytest.mark.skipif(not NEO4J_URI, reason="no Neo4j server: set NEO4J_URI (and NEO4J_PASSWORD) to a test database")
@pytest.mark.parametrize(
    ("query", "why"),
    [pytest.param(q, w, id=i) for i, q, w in RUNTIME if i in ("cartesian-7", "var-length-1-30", "unwind-range-squared", "reduce-list-quadratic")],
)
def test_neo4j_server_attacks_end_in_time(query: str, why: str) -> None:
    """Run-time attacks against a real server end by the transaction timeout (its memory is the server's guard)."""
    from ragplan.tools.graphdb import Neo4jGraphStore, split_statements

    neo = Neo4jGraphStore(NEO4J_URI)
    try:
        neo.load_statements(split_statements(graph_script(), "attack.cql"), source="attack.cql", replace=True)
        t0 = time.monotonic()
        out = run_graph_query(neo, query, row_cap=100, timeout_s=TIMEOUT_S)
        assert time.monotonic() - t0 < HANG_S  # (the server's transaction timeout stops it: its error kind says so)
        assert out.ok or out.error_kind in ("timeout", "error")
        assert neo.query("MATCH (n) RETURN count(n) AS c").rows == [{"c": N}]
    finally:
        neo.close()


def test_worker_killed_while_idle_is_replaced_silently(store: EmbeddedGraphStore) -> None:
    """A worker that ended between queries (OOM killer, an operator) costs the next query nothing."""
    import signal

    pool = store.sandbox
    store.query("RETURN 1 AS one")
    for pid in pool.worker_pids():
        os.kill(pid, signal.SIGKILL)
    time.sleep(0.1)
    assert store.query("MATCH (n) RETURN count(n) AS c").rows == [{"c": N}]


def worker_children() -> set[int]:
    """This process's live query-worker children, read from /proc (not from the pool's own books)."""
    pids: set[int] = set()
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/children") as fh:
                pids.update(int(p) for p in fh.read().split())
        except OSError:
            continue
    out = set()
    for pid in pids:
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                if b"sandbox_worker" in fh.read():
                    out.add(pid)
        except OSError:
            continue
    return out


class TestWorkerBudget:
    """One budget of workers (count and memory) for every store of the process, as a batch of DQA questions has."""

    def test_many_stores_at_once_stay_within_the_budget(self, tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
        from concurrent.futures import ThreadPoolExecutor

        import ragplan.tools.graphdb.tool as tool_mod
        from ragplan.tools.graphdb import StoreSpec, open_store
        from ragplan.tools.graphdb.sandbox import WORKERS

        monkeypatch.setattr(WORKERS, "max_workers", 3)
        monkeypatch.setattr(WORKERS, "memory_mb", 192)
        monkeypatch.setattr(tool_mod, "STORE_CACHE_SIZE", 2)
        monkeypatch.setattr(tool_mod, "_cache", type(tool_mod._cache)())
        paths = []
        for i in range(6):  # one script per question, as DQA has
            paths.append(tmp_path / f"q{i}.cql")
            paths[-1].write_text(graph_script() + f"\nCREATE (:Tag {{k: {i}}});\n")
        open_store(StoreSpec(graph_path=str(paths[0]))).query("RETURN 1 AS one")  # idle workers of earlier tests go
        peak, stop = [len(worker_children())], threading.Event()

        def sample() -> None:
            while not stop.wait(0.005):
                peak[0] = max(peak[0], len(worker_children()))

        hungry = "RETURN size(reduce(s = 'ab', i IN range(1, 40) | s + s)) AS n"

        def ask(k: int) -> Any:
            store = open_store(StoreSpec(graph_path=str(paths[k % 6])))
            query = hungry if k % 4 == 0 else f"MATCH (t:Tag) MATCH (n {{i: {k % N}}}) RETURN t.k AS k, n.name AS name"
            return store, k, run_graph_query(store, query, row_cap=10, timeout_s=20)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        try:
            with ThreadPoolExecutor(12) as pool:
                results = list(pool.map(ask, range(36)))
        finally:
            stop.set()
            sampler.join()
        assert peak[0] <= 3, f"{peak[0]} workers were alive at once"
        for store, k, out in results:
            if k % 4 == 0:  # the hungry query got its share of the run's memory, not a gigabyte
                assert not out.ok and "exceeded the 192 MB memory budget" in out.observation, out.observation
            else:
                assert out.ok and out.observation == f"k | name\n{k % 6} | n{k % N}", out.observation
        evicted = {id(s): s for s, _, _ in results if s not in tool_mod._cache.values()}.values()
        assert evicted
        for store in evicted:  # an evicted store keeps no worker, and a run still holding it can query it
            assert store.sandbox.worker_pids() == []
        assert not worker_children() - {p for s in tool_mod._cache.values() for p in s.sandbox.worker_pids()}
        store = next(iter(evicted))
        assert store.query("MATCH (t:Tag) RETURN count(t) AS c").rows == [{"c": 1}]
        assert store.sandbox.worker_pids() == []

    def test_the_query_using_the_most_of_the_shared_memory_is_stopped(self) -> None:
        """Past ``memory_mb`` in all (growth beyond each worker's loaded graph), only the biggest grower is stopped;
        an ended worker no longer counts."""
        from ragplan.tools.graphdb.sandbox import WorkerBudget

        class Worker:  # what the budget reads of a worker
            base_rss, growth, dead = 40 << 20, 0, False

        budget, mb = WorkerBudget(max_workers=4, memory_mb=100), 1 << 20
        a, b, c = Worker(), Worker(), Worker()
        budget.live.update([a, b, c])  # type: ignore[list-item]
        assert not budget.over(a, 70 * mb) and not budget.over(b, 90 * mb)  # 30 + 50 MB: within the budget
        assert not budget.over(c, 80 * mb)  # 120 MB in all, but b uses more than c
        assert budget.over(b, 91 * mb)  # b is the biggest: it is the one stopped
        b.dead = True
        assert not budget.over(c, 80 * mb)  # 30 + 40 MB once b has ended
        assert budget.worker_memory(SandboxSettings()) == 100 * mb  # and no one query gets more than the whole budget

    def test_waiting_for_a_worker_counts_in_the_time_budget(self, monkeypatch: pytest.MonkeyPatch) -> None:
        from ragplan.tools.graphdb.sandbox import WORKERS

        monkeypatch.setattr(WORKERS, "max_workers", 1)
        busy, waiting = (EmbeddedGraphStore.from_text(graph_script()) for _ in range(2))
        try:
            held = busy.sandbox._checkout(time.monotonic() + 30)  # the only worker, held (as a long query would)
            assert held is not None
            try:  # (were the wait not in the budget, the call would wait on the held worker until the hang bound)
                t0 = time.monotonic()
                out = run_graph_query(waiting, "RETURN 1 AS one", row_cap=1, timeout_s=1)
                assert time.monotonic() - t0 < HANG_S / 3
                assert out.error_kind == "timeout" and "no query worker was free" in out.observation, out.observation
                assert "past the 1 s time budget" in out.observation, out.observation
            finally:
                busy.sandbox._checkin(held)
            assert waiting.query("RETURN 1 AS one").rows == [{"one": 1}]  # free again: it takes the idle worker
            assert len(worker_children()) <= 1
        finally:
            busy.close()
            waiting.close()
