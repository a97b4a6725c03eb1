"""One declaration per setting: the CLI's setting flags and docs/settings.md are generated from the context classes."""

from __future__ import annotations

import json
import os
from dataclasses import fields
from pathlib import Path
from typing import Any, Literal, get_args, get_origin, get_type_hints

import pytest

from ragplan.cli import build_parser, main
from ragplan.cli.settings import flag_of, settings_from_args, settings_markdown
from ragplan.registry import families
from tests.auto_reply import auto_responder
from tests.openai_server import OpenAIStub
from tests.test_datasets import write_json
from tests.test_eval_sweep import _hotpot

ROOT = Path(__file__).resolve().parents[1]


def _sample(kind: Any, default: Any) -> tuple[list[str], Any]:
    """The command-line word for a value of ``kind`` other than ``default``, and the value it means."""
    if get_origin(kind) is Literal:
        value = next(v for v in get_args(kind) if v != default)
        return [str(value)], value
    value = {int: 7, float: 0.25, str: "some text"}[kind]
    return [str(value)], value


@pytest.mark.parametrize("family", [f.name for f in families()])
def test_a_flag_for_every_settable_field_parsed_to_its_type(family):
    fam = next(f for f in families() if f.name == family)
    method = fam.graphs[0].name
    hints = get_type_hints(fam.context)
    settable = fam.settable()
    for f in fields(fam.context):
        if f.name not in settable:
            assert f.metadata.get("python_only"), f.name  # only live objects are left out
            continue
        kind, default = hints[f.name], settable[f.name][1]
        for flag in flag_of(f):  # the alias (--graph) and the flag from the field name (--graph-path)
            if kind is bool:
                words, value = [flag if not default else "--no-" + flag[2:]], not default
            else:
                rest, value = _sample(kind, default)
                words = [flag, *rest]
            args = build_parser(["ask", "--method", method]).parse_args(["ask", "--method", method, "--question", "q", *words])
            got = settings_from_args(args, fam, method)
            assert got == {f.name: value} and type(got[f.name]) is type(value), (flag, got)


def test_python_only_fields_get_no_flag(capsys):
    with pytest.raises(SystemExit):
        main(["ask", "--method", "reaper", "--help"])
    out = capsys.readouterr().out
    for name in ("chat_model", "planner_chat_model", "responder_chat_model", "tool_registry"):
        assert "--" + name.replace("_", "-") not in out
    with pytest.raises(SystemExit) as e:
        main(["ask", "--method", "planrag", "--question", "q", "--graph-store", "x"])
    assert e.value.code == 2


def test_ask_help_is_short_and_a_methods_help_adds_its_family(capsys):
    with pytest.raises(SystemExit):
        main(["ask", "--help"])
    short = capsys.readouterr().out
    assert len(short.splitlines()) < 80 and "--model" in short and "--temperature" in short and "--thread" in short
    assert "--shop" not in short and "--graph" not in short and "--beta" not in short
    with pytest.raises(SystemExit):
        main(["ask", "--method", "reaper", "--help"])
    reaper = capsys.readouterr().out
    assert "--shop DIR, --shop-dir DIR" in reaper and "[env RAGPLAN_SHOP_DIR]" in reaper and "--max-plan-repairs" in reaper
    assert "--graph" not in reaper and "--beta" not in reaper


def test_a_bad_value_is_exit_2_naming_the_setting(trade_cql, capsys, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "x")
    base = ["ask", "--method", "planrag", "--graph", str(trade_cql), "--question", "q", "--base-url", "http://127.0.0.1:9/v1"]
    for words, named in [(["--max-steps", "many"], "max_steps='many'"), (["--temperature", "-1"], "temperature='-1': must not be negative"),
                         (["--structured-output", "xml"], "structured_output='xml'"),
                         (["--beta", "0.3"], "--beta does not apply to planrag")]:
        assert main([*base, *words]) == 2
        err = capsys.readouterr().err
        assert named in err and "Traceback" not in err, (words, err)
    for cmd in (["eval", "--method", "cot", "--benchmark", "hotpotqa", "--data", "x.json"],
                ["compare", "--methods", "cot,standard", "--benchmark", "hotpotqa", "--data", "x.json"]):
        assert main([*cmd, "--max-subqueries", "-2"]) == 2
        assert "max_subqueries='-2': must not be negative" in capsys.readouterr().err


def test_eval_takes_temperature_and_structured_output_into_the_run(tmp_path, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    data = write_json(tmp_path / "h.json", _hotpot())
    run = tmp_path / "run"
    with OpenAIStub(responder=auto_responder(text=json.dumps({"answer": "Lake Orvan"}))) as stub:
        code = main(["eval", "--method", "standard", "--benchmark", "hotpotqa", "--data", str(data), "--limit", "1",
                     "--model", "openai:stub-model", "--base-url", stub.base_url, "--temperature", "0.5",
                     "--structured-output", "text", "--out", str(run), "--no-progress"])
        assert code == 0
        assert stub.requests and all(r.body.get("temperature") == 0.5 for r in stub.requests)
        url = stub.base_url
    settings = json.loads((run / "settings.json").read_text())
    assert settings["context"] == {"temperature": 0.5, "structured_output": "text"}
    assert settings["model"] == "openai:stub-model" and settings["base_url"] == url


def test_docs_settings_md_is_the_commands_output(monkeypatch, capsys):
    for k in [k for k in os.environ if k.startswith(("RAGPLAN_", "NEO4J_"))]:  # no setting of the caller's shell
        monkeypatch.delenv(k)
    monkeypatch.chdir(ROOT)
    code = main(["graphs", "--settings-md"])
    out = capsys.readouterr()
    assert code == 0, out.err
    assert (ROOT / "docs" / "settings.md").read_text() == out.out == settings_markdown(families()), \
        "regenerate it: ragplan graphs --settings-md > docs/settings.md"
    for fam in families():
        for name in fam.settable():
            assert f"| `{name}` |" in out.out
