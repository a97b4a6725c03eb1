"""Command-line flags and docs/settings.md, generated from the families' context classes: a settable field becomes
``--field-name`` plus its metadata's alias (``--graph``), a bool a ``--x / --no-x`` switch; values are validated by
the field's type, as ``--set KEY=VALUE`` is."""

from __future__ import annotations

import argparse
import json
from dataclasses import MISSING, Field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, get_args, get_origin, get_type_hints

from ragplan.cli.errors import BadInput
from ragplan.state.context import LLMContext

if TYPE_CHECKING:
    from ragplan.family import MethodFamily

__all__ = ["add_setting_flags", "add_field_flag", "given_settings", "settings_from_args", "flag_of",
           "parse_assignments", "check_llm", "settings_markdown", "methods_in"]

#: The settings every family shares (shown in every command's --help).
SHARED = [f.name for f in fields(LLMContext) if not f.metadata.get("python_only")]


def flag_of(f: Field[Any]) -> list[str]:
    """The flags of a field: its alias (``--graph``) first, then the one from its name (``--graph-path``)."""
    own = "--" + f.name.replace("_", "-")
    alias = f.metadata.get("flag")
    return [alias, own] if alias and alias != own else [own]


def _metavar(kind: Any, name: str) -> str:
    if get_origin(kind) is Literal:
        return "{" + ",".join(map(str, get_args(kind))) + "}"
    return {int: "N", float: "X"}.get(kind) or {"_dir": "DIR", "_path": "FILE"}.get(name[name.rfind("_"):], "TEXT")


def add_field_flag(group: Any, f: Field[Any], kind: Any, default: Any, shown: bool = True, **extra: Any) -> None:
    """The flag(s) of field ``f`` (dest ``set_<name>``, None when not given); its help names ``default``."""
    env = " [env " + " / ".join(f.metadata["env"]) + "]" if f.metadata.get("env") else ""
    text = f"{f.metadata.get('description', '')}{env} (default: {default!r})".replace("%", "%%")
    how = {"action": argparse.BooleanOptionalAction} if kind is bool else {"metavar": _metavar(kind, f.name)}
    group.add_argument(*flag_of(f), dest="set_" + f.name, default=None, help=text if shown else argparse.SUPPRESS,
                       **how, **extra)


def given_settings(args: argparse.Namespace) -> dict[str, Any]:
    """The settings given by flags (``set_<name>`` values that are not None)."""
    return {k[4:]: v for k, v in vars(args).items() if k.startswith("set_") and v is not None}


def add_setting_flags(parser: argparse.ArgumentParser, fams: list[MethodFamily], shown: list[MethodFamily]) -> None:
    """Add one flag per settable field of every family in ``fams``; ``--help`` lists the shared LLM settings and the
    settings of the families in ``shown`` (the others are accepted, so a flag of another family is refused by name)."""
    groups = {"": parser.add_argument_group("LLM settings (every method; also --set KEY=VALUE)")}
    seen: dict[str, list[str]] = {}
    for fam in [*shown, *(f for f in fams if f not in shown)]:
        settable = fam.settable()  # name -> (type, default, description); Python-only fields left out
        for f in (f for f in fields(fam.context) if f.name in settable):
            if f.name in seen:
                if seen[f.name] != flag_of(f):
                    raise RuntimeError(f"{f.name} has flags {seen[f.name]} and {flag_of(f)} in {fam.name}")
                continue
            seen[f.name] = flag_of(f)
            group: Any = parser
            if f.name in SHARED:
                group = groups[""]
            elif fam in shown:
                group = groups.get(fam.name) or groups.setdefault(fam.name, parser.add_argument_group(
                    f"{fam.title} settings ({', '.join(g.name for g in fam.graphs)})"))
            add_field_flag(group, f, *settable[f.name][:2], shown=group is not parser)
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="any setting by its name (repeatable; VALUE is JSON or text), e.g. --set max_steps=8")


def methods_in(argv: list[str]) -> list[str]:
    """The methods an (unparsed) command line names with ``--method M`` or ``--methods A,B``."""
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--method", default="")
    pre.add_argument("--methods", default="")
    known, _ = pre.parse_known_args(argv)
    return [m.strip() for m in f"{known.method},{known.methods}".split(",") if m.strip()]


def settings_from_args(args: argparse.Namespace, fam: MethodFamily, method: str) -> dict[str, Any]:
    """The settings the command line gives ``method`` (flags, then ``--set``), converted to their fields' types;
    BadInput naming the flag or setting that does not apply or does not validate."""
    from ragplan.registry import families

    given = given_settings(args)
    if foreign := sorted(set(given) - set(fam.settable())):
        flag = next(flag_of(f)[0] for other in families() for f in fields(other.context) if f.name == foreign[0])
        raise BadInput(f"{flag} does not apply to {method} ({fam.title}); its data: {fam.data_help or '-'}")
    try:
        out = fam.check_settings(method, given)
    except ValueError as exc:
        raise BadInput(f"bad setting {exc}") from None
    try:
        return {**out, **fam.check_settings(method, parse_assignments(getattr(args, "set", None) or []))}
    except ValueError as exc:
        raise BadInput(f"--set {exc}") from None


def parse_assignments(pairs: list[str]) -> dict[str, Any]:
    """``KEY=VALUE`` pairs with JSON values where they parse (``max_steps=8``, ``page_context={…}``), text otherwise;
    a value that starts like a JSON object or list must be one (else ValueError naming the key)."""
    out: dict[str, Any] = {}
    for p in pairs:
        if "=" not in p:
            raise ValueError(f"expected KEY=VALUE, got {p!r}")
        k, v = p.split("=", 1)
        try:
            out[k.strip()] = json.loads(v)
        except json.JSONDecodeError as exc:
            if v.lstrip().startswith(("{", "[")):
                raise ValueError(f"{k.strip()}: not valid JSON ({exc.msg} at column {exc.colno}): {v[:80]!r}") from None
            out[k.strip()] = v
    return out


def check_llm(st: Any) -> None:
    """BadInput when the LLM cache (``--llm-cache`` / ``--replay``) or the endpoint of a run's settings or context
    cannot work; checked before any question runs."""
    from ragplan.redact import remember_credentials
    from ragplan.llm import endpoint_problem

    remember_credentials(st.base_url)  # masked in what is printed or written from now on
    cache, replay = st.llm_cache_dir, st.llm_replay
    if replay and not cache:
        raise BadInput("--replay needs --llm-cache DIR (the cache to replay from)")
    if replay and not Path(cache).is_dir():
        raise BadInput(f"--llm-cache {cache}: no such folder, nothing to replay")
    if cache and Path(cache).exists() and not Path(cache).is_dir():
        raise BadInput(f"--llm-cache {cache}: not a folder")
    problem = not getattr(st, "server", "") and endpoint_problem(st.model, st.base_url, replay)  # (a server has its own keys)
    if problem:
        raise BadInput(problem)


def settings_markdown(fams: list[MethodFamily]) -> str:
    """docs/settings.md: one table of the shared LLM settings, then one per family of its own settings."""
    def row(f: Field[Any], kind: Any) -> str:
        env = f.metadata.get("env")
        default = repr(f.metadata.get("env_default", "")) if env else "-" if f.default is MISSING else repr(f.default)
        how = "Python only" if f.metadata.get("python_only") else " ".join(f"`{x}`" for x in flag_of(f))
        desc = str(f.metadata.get("description", "")) + (f" Default from {' / '.join(env)}." if env else "")
        kind = (kind.__name__ if isinstance(kind, type) else "one of " + ", ".join(map(str, get_args(kind)))
                if get_origin(kind) is Literal else str(kind).replace("typing.", ""))
        return f"| `{f.name}` | {how} | {kind} | `{default}` | {desc.replace('|', '/')} |"

    head = "| setting | flags | type | default | description |\n| --- | --- | --- | --- | --- |"
    shared = {f.name for f in fields(LLMContext)}
    out = ["# Settings", "", "Generated by `ragplan graphs --settings-md` from the families' context classes (the only "
           "declaration of a setting): each is a field of the graph's context (Studio's form, `ragplan.api.ask(…, "
           "name=value)`) and a flag of `ragplan ask`, `eval`, `eval sweep`, `compare` and `resume` (or `--set "
           "name=value`). A `--x` switch is turned off with `--no-x`. Python-only fields take live objects and have no "
           "flag.", "", "## Every method (LLM)", "", head]
    out += [row(f, get_type_hints(LLMContext)[f.name]) for f in fields(LLMContext)]
    for fam in fams:
        hints = get_type_hints(fam.context)
        out += ["", f"## {fam.title}", "", f"Graphs: {', '.join(f'`{g.name}`' for g in fam.graphs)}. Data: "
                f"{fam.data_help or '-'}.", "", head]
        out += [row(f, hints[f.name]) for f in fields(fam.context) if f.name not in shared]
    return "\n".join(out) + "\n"
