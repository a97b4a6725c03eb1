"""``ragplan reaper validate``: steps or line-numbered errors, --json, exit codes 0 / 1 / 2."""

from __future__ import annotations

import argparse
import json

import pytest

from ragplan.methods.reaper.cli import add_validate_parser, run_validate
from ragplan.tools import suites as tool_registry
from tests.test_reaper_plan import FIGURE_2, FIGURE_4, FIGURE_6, examples
from tests.test_reaper_validate import retail_like_registry


def parser() -> argparse.ArgumentParser:
    """``ragplan reaper …`` as the main CLI wires it: validate on the reaper command's subparsers."""
    p = argparse.ArgumentParser(prog="ragplan")
    sub = p.add_subparsers(dest="command")
    reaper = sub.add_parser("reaper")
    add_validate_parser(reaper.add_subparsers(dest="reaper_command", required=True))
    return p


def run(*argv: str) -> int:
    args = parser().parse_args(["reaper", "validate", *argv])
    assert args.reaper_command == "validate"
    return run_validate(args)


@pytest.fixture
def fake_suite(monkeypatch):
    """``--tools retail`` resolves to the test registry (the real suite is written elsewhere)."""
    real = tool_registry.get_suite

    def get_suite(name, **options):
        if name == "retail":
            return retail_like_registry()
        return real(name, **options)

    monkeypatch.setattr(tool_registry, "get_suite", get_suite)


def write(tmp_path, text, name="plan.txt"):
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return str(p)


def test_valid_plan_prints_steps(tmp_path, capsys, fake_suite):
    path = write(tmp_path, examples(FIGURE_2)[3])
    assert run(path, "--tools", "retail") == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split() == ["STEP", "VAR", "TOOL", "ARGUMENTS"]
    assert out[1].split(None, 3) == ["1", "#E1", "date_math", 'expr="tomorrow"']
    assert out[2].split(None, 3) == ["2", "#E2", "shipment_status", 'date_range=#E1, keywords="sheet pan"']
    assert out[-1].endswith("valid, 2 steps (tools: retail)")


def test_invalid_plan_prints_line_numbered_errors(tmp_path, capsys, fake_suite):
    path = write(tmp_path, FIGURE_4[2])  # Claude's nut-free coins plan: unreadable steps
    assert run(path) == 1
    captured = capsys.readouterr()
    lines = captured.out.splitlines()
    assert lines[0].startswith("line 9: step 2: cannot read the argument")
    assert lines[1].startswith("line 11: step 3: cannot read the argument")
    assert lines[-1].endswith("invalid (2 problems, tools: retail)")
    assert "note: line 5: text outside any step ignored" in captured.err  # prose is a note, not an error

    path = write(tmp_path, FIGURE_6, "ink.txt")
    assert run(path) == 1
    out = capsys.readouterr().out
    assert ('line 5: step 1: compatible_products has no argument "compatible_product_type" '
            "(did you mean product_type?)") in out


def test_json_output(tmp_path, capsys, fake_suite):
    path = write(tmp_path, 'Step 1: a - #E1 = prod_qna("B01", "Is #E0 ok?")\nStep 2: b - #E2 = prod_serch("x")')
    assert run(path, "--json") == 1
    doc = json.loads(capsys.readouterr().out)
    assert set(doc) >= {"valid", "steps", "errors"} and doc["valid"] is False
    assert doc["steps"][0] == {"step": 1, "line": 1, "evidence_var": "#E1", "tool": "prod_qna", "purpose": "a",
                               "args": {"product_id": "B01", "question": "Is #E0 ok?"}, "extra_positional": [],
                               "refs": ["#E0"], "call": 'prod_qna("B01", "Is #E0 ok?")'}
    assert [(e["line"], e["kind"]) for e in doc["errors"]] == [(1, "missing_ref"), (2, "unknown_tool")]
    path = write(tmp_path, examples(FIGURE_2)[1], "ok.txt")
    assert run(path, "--json") == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["valid"] is True and doc["errors"] == [] and doc["steps"][0]["args"]["product_id"] == "J6FLBNBQ31"


def test_empty_plan_is_valid(tmp_path, capsys, fake_suite):
    assert run(write(tmp_path, "No retrieval needed\n")) == 0
    assert capsys.readouterr().out.strip().endswith("valid, 0 steps (tools: retail)")


def test_unreadable_file_and_unknown_suite_exit_2(tmp_path, capsys, fake_suite):
    assert run(str(tmp_path / "missing.txt")) == 2
    assert "cannot read the plan file" in capsys.readouterr().err
    assert run(str(tmp_path)) == 2  # a directory
    bad = tmp_path / "latin1.txt"
    bad.write_bytes(b"\xff\xfe#E1 = f(\xe9)")
    assert run(str(bad)) == 2
    assert run(write(tmp_path, '#E1 = prod_search("x")'), "--tools", "no_such_suite") == 2
    assert "unknown tool suite 'no_such_suite'" in capsys.readouterr().err


def test_stdin(monkeypatch, capsys, fake_suite):
    import io

    monkeypatch.setattr("sys.stdin", io.StringIO('#E1 = prod_search("mug")'))
    assert run("-") == 0
    assert "prod_search" in capsys.readouterr().out


def test_real_retail_suite_accepts_the_papers_plans(tmp_path, capsys):
    try:
        import ragplan.tools.retail  # noqa: F401
    except ImportError as exc:
        pytest.skip(f"ragplan.tools.retail is not importable: {exc}")
    suite = tool_registry.get_suite("retail")
    assert {"prod_search", "prod_qna", "shipment_status", "customer_support", "date_math"} <= set(suite.names())
    for i, text in enumerate(examples(FIGURE_2)):
        path = write(tmp_path, text, f"fig2_{i}.txt")
        assert run(path, "--tools", "retail", "--json") == 0, capsys.readouterr().out
        doc = json.loads(capsys.readouterr().out)
        assert doc["valid"] is True


def test_empty_or_junk_plan_file_is_not_a_valid_plan(tmp_path, capsys, fake_suite):
    assert run(str(write(tmp_path, "  \n"))) == 2
    assert "is empty" in capsys.readouterr().err
    assert run(str(write(tmp_path, "hello world\njunk junk\n"))) == 1
    assert "no plan steps" in capsys.readouterr().out
    assert run(str(write(tmp_path, "No retrieval needed.\n"))) == 0  # the written form of a plan without steps
    assert "valid, 0 steps" in capsys.readouterr().out
