"""Benchmark the LLM record/replay cache by prompt size, medians per call: ``key_ms`` (request key), ``write_ms``
(recording), ``hit_ms`` (serving) and ``replay_decide_ms`` (a whole ``decide`` in replay). No network.
Usage: python benchmarks/llm_cache.py [--sizes 2000,20000,100000] [--calls 200] [--save FILE.json]"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from langchain_core.load import dumps
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from langchain_core.outputs import ChatGeneration

from common import add_report_flags, print_rows, save_report  # noqa: E402

from ragplan.llm import decide, load_chat_model  # noqa: E402
from ragplan.llm_cache import LLMCache, digest_of  # noqa: E402
from ragplan.nodes.planrag.plan import Plan  # noqa: E402


def _ms(fn, n: int) -> float:
    times = []
    for i in range(n):
        t0 = time.perf_counter()
        fn(i)
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


def measure(size: int, calls: int, root: Path) -> dict[str, float]:
    """The per-call figures for prompts of ``size`` characters."""
    model = load_chat_model("openai:bench-model", cache_dir=str(root / f"c{size}"), replay=True)
    text = ("The trade node upstream sends value downstream in proportion to power. " * (size // 72 + 1))[:size]
    prompts = [[SystemMessage(text), HumanMessage(f"Question {i}: where should the merchant go?")] for i in range(calls)]
    serialised = [dumps(p) for p in prompts]
    writer = LLMCache(root / f"c{size}")
    reply = AIMessage("", tool_calls=[{"name": "Plan", "args": {"steps": ["count the nodes", "compare flows"]}, "id": "c1"}],
                      usage_metadata={"input_tokens": size // 4, "output_tokens": 20, "total_tokens": size // 4 + 20})
    seen: dict[str, str] = {}

    class Capture(LLMCache):  # what LangChain hands the cache for this decision
        def lookup(self, prompt: str, llm_string: str):  # type: ignore[override]
            seen["llm_string"] = llm_string
            return [ChatGeneration(message=reply)]

    decide(model.model_copy(update={"cache": Capture(root)}), prompts[0], Plan)
    llm_string = seen["llm_string"]
    row = {"prompt_chars": size}
    row["key_ms"] = _ms(lambda i: digest_of(serialised[i], llm_string), calls)
    row["write_ms"] = _ms(lambda i: writer.update(serialised[i], llm_string, [ChatGeneration(message=reply)]), calls)
    row["hit_ms"] = _ms(lambda i: writer.lookup(serialised[i], llm_string), calls)
    row["replay_decide_ms"] = _ms(lambda i: decide(model, prompts[i], Plan), calls)
    assert decide(model, prompts[0], Plan).ok  # the replay really served the recorded decision
    return row


def main() -> None:
    """Run the measurement and print the table."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="2000,20000,100000", help="prompt sizes in characters (comma-separated)")
    ap.add_argument("--calls", type=int, default=200, help="calls per figure (the median is shown)")
    add_report_flags(ap, "hit_ms")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        rows = [measure(int(s), a.calls, Path(tmp)) for s in a.sizes.split(",") if s.strip()]
    print_rows(rows, [("prompt_chars", "d"), ("key_ms", ".3f"), ("write_ms", ".3f"), ("hit_ms", ".3f"),
                      ("replay_decide_ms", ".3f")], "prompt_chars", a.baseline, "hit_ms")
    save_report(a.save, "llm_cache", rows, calls=a.calls)


if __name__ == "__main__":
    main()
