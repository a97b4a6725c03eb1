"""A reply just under ``max_reply_chars`` is stored once: once per results line, bounded in later prompts.

The LLM is the local OpenAI-compatible stub (:mod:`tests.auto_reply`) reached through the real client; the
long text is ~150,000 characters of lower-case words, so the normalised answer is the same text.
"""

from __future__ import annotations

import json

from ragplan.cli import main
from ragplan.eval.question_runner import LARGE_TEXT, once
from tests.auto_reply import auto_responder
from tests.openai_server import OpenAIStub

BIG = ("lorem ipsum dolor " * 8_400).strip()  # 151,199 characters, under the 200,000 default cap
MODEL = ["--model", "openai:stub-model"]


def _eval(tmp_path, stub, *args: str) -> tuple[str, dict]:
    run = tmp_path / "run"
    code = main(["eval", *args, "--limit", "1", *MODEL, "--base-url", stub.base_url, "--out", str(run),
                 "--no-progress"])
    assert code == 0
    line = (run / "results.jsonl").read_text()
    return line, json.loads(line)


def test_a_long_answer_is_written_once_in_a_text_qa_results_line(tmp_path, local_endpoint):
    from tests.test_datasets import HOTPOT, write_json

    data = write_json(tmp_path / "hotpot.json", HOTPOT[:1])
    with OpenAIStub(responder=auto_responder({"ShortAnswer": {"answer": BIG}})) as stub:
        line, rec = _eval(tmp_path, stub, "--method", "standard", "--benchmark", "hotpotqa", "--data", str(data))
    assert rec["answer"] == BIG and rec["error"] == ""
    assert len(line) < len(BIG) + 5_000  # was 3 copies: answer, chosen, queries[0].answer
    assert rec["chosen"] == BIG[:200] + "…"  # the normalised answer, a display copy
    assert rec["queries"][0]["answer"] == f"[same text as answer: {len(BIG):,} characters]"
    assert rec["em"] == 0.0 and rec["question"] == HOTPOT[0]["question"]


def test_planrag_stores_a_long_self_thinking_step_once_and_bounds_it_in_later_prompts(tmp_path, local_endpoint):
    from ragplan.methods.planrag.generate import generate_clone

    clone = tmp_path / "dqa"
    generate_clone(clone, "locating", 1, seed=0)

    def act(req):
        if "\nObservation" in req.prompt_text:
            return {"thought": "enough", "action": "finish", "action_input": ""}
        return {"thought": "reason it out", "action": "self_thinking", "action_input": BIG}

    overrides = {"Plan": {"steps": ["Reason about the nodes"]}, "RetrievalAction": act,
                 "ReplanDecision": {"replan": False, "reason": "fine"}, "FinalAnswer": {"answer": "lubeck"}}
    with OpenAIStub(responder=auto_responder(overrides)) as stub:
        line, rec = _eval(tmp_path, stub, "--method", "planrag", "--benchmark", "dqa-locating", "--data", str(clone))
        prompts = [len(r.prompt_text) for r in stub.requests]
    step = rec["steps"][0]
    assert step["query"] == BIG and step["observation"] == f"[same text as steps[0].query: {len(BIG):,} characters]"
    assert len(line) < len(BIG) + 10_000  # was 2 copies (the step's input and its observation)
    # the step went into the next prompts cut to the trace budget (was whole, twice: 302,000+ characters)
    assert len(prompts) >= 4 and max(prompts) < 30_000, prompts
    assert any("…(shortened)" in r.prompt_text for r in stub.requests)


def test_once_keeps_short_copies_and_the_executed_queries():
    q = "q" * (LARGE_TEXT + 1)
    rec = once({"question": q, "answer": "Paris", "executed_queries": [q], "queries": [{"text": q, "answer": "Paris"}]})
    assert rec["answer"] == rec["queries"][0]["answer"] == "Paris"  # short texts repeat as before
    assert rec["executed_queries"] == [q]  # read by `ragplan eval retrieval --queries`
    assert rec["queries"][0]["text"] == f"[same text as question: {len(q):,} characters]"
