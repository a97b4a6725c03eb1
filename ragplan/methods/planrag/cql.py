"""Reading DQA's ``.cql`` scripts into records in file order (the annotator's tie-breaking depends on it) without a
graph engine: a plain file (one statement per line) by one regex pass and one ``json.loads`` of its distinct maps,
anything else by the statement splitter and :func:`parse_statements`; both give the same :class:`GraphData`."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from ragplan.tools.graphdb.script import ScriptError, Statement, decode_script, read_script_bytes, split_statements

__all__ = ["NodeRec", "RelRec", "GraphData", "parse_map", "parse_statements", "read_graph_data", "graph_data_from_text",
           "graph_data_from_bytes"]


class NodeRec(NamedTuple):
    """A created node: its label and properties."""

    label: str
    props: dict[str, Any]
    line: int = 0


class RelRec(NamedTuple):
    """A created relationship: type, the two matched endpoints (label + key map), properties."""

    type: str
    src_label: str
    src_key: dict[str, Any]
    dst_label: str
    dst_key: dict[str, Any]
    props: dict[str, Any]
    line: int = 0


@dataclass
class GraphData:
    """All nodes and relationships of a script, in file order; maps with the same text may be one shared dict,
    so the records are read-only."""

    source: str
    nodes: list[NodeRec] = field(default_factory=list)
    rels: list[RelRec] = field(default_factory=list)


_VALUE = re.compile(
    r"""\s*(?:
        "(?P<dq>(?:[^"\\]|\\.)*)"
      | '(?P<sq>(?:[^'\\]|\\.)*)'
      | (?P<num>[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)
      | (?P<word>true|false|null|TRUE|FALSE|NULL|True|False)
    )\s*""",
    re.VERBOSE,
)
_KEY = re.compile(r"\s*(`[^`]+`|[A-Za-z_][\w]*)\s*:")


def _unescape(s: str) -> str:
    if "\\" not in s:
        return s
    return re.sub(r"\\(.)", lambda m: {"n": "\n", "t": "\t"}.get(m.group(1), m.group(1)), s)


def parse_map(text: str) -> dict[str, Any]:
    """Parse a Cypher map literal body (``name:"a", x: 1.5, ok:true``) into a dict; ValueError if malformed."""
    out: dict[str, Any] = {}
    pos, n = 0, len(text)
    while pos < n and text[pos:].strip():
        km = _KEY.match(text, pos)
        if not km:
            raise ValueError(f"expected a property name at {text[pos:pos + 20]!r}")
        key = km.group(1).strip("`")
        vm = _VALUE.match(text, km.end())
        if not vm:
            raise ValueError(f"expected a value for {key!r} at {text[km.end():km.end() + 20]!r}")
        if vm.group("dq") is not None:
            val: Any = _unescape(vm.group("dq"))
        elif vm.group("sq") is not None:
            val = _unescape(vm.group("sq"))
        elif vm.group("num") is not None:
            t = vm.group("num")
            val = float(t) if any(c in t for c in ".eE") else int(t)
        else:
            val = {"true": True, "false": False, "null": None}[vm.group("word").lower()]
        out[key] = val
        pos = vm.end()
        if pos < n and text[pos] == ",":
            pos += 1
        elif text[pos:].strip():
            raise ValueError(f"expected ',' at {text[pos:pos + 20]!r}")
    return out


_NODE = r"\(\s*(?P<{v}>\w*)\s*:\s*(?P<{l}>\w+)\s*\{{(?P<{m}>[^{{}}]*)\}}\s*\)"
_CREATE_NODE = re.compile(r"^\s*CREATE\s*" + _NODE.format(v="v", l="label", m="map") + r"\s*;?\s*$", re.I | re.S)
_MATCH_CREATE_REL = re.compile(
    r"^\s*MATCH\s*" + _NODE.format(v="v1", l="l1", m="m1") + r"\s*,\s*" + _NODE.format(v="v2", l="l2", m="m2")
    + r"\s*CREATE\s*\(\s*(?P<a>\w+)\s*\)\s*-\s*\[\s*\w*\s*:\s*(?P<type>\w+)\s*(?:\{(?P<rm>[^{}]*)\})?\s*\]\s*->\s*"
    r"\(\s*(?P<b>\w+)\s*\)\s*;?\s*$",
    re.I | re.S,
)


def parse_statements(statements: list[Statement], source: str) -> GraphData:
    """Parse DQA-shaped statements; anything else raises :class:`ScriptError` with its line."""
    data = GraphData(source)
    for st in statements:
        try:
            m = _CREATE_NODE.match(st.text)
            if m:
                data.nodes.append(NodeRec(m.group("label"), parse_map(m.group("map")), st.line))
                continue
            m = _MATCH_CREATE_REL.match(st.text)
            if m:
                ends = {m.group("v1"): (m.group("l1"), parse_map(m.group("m1"))),
                        m.group("v2"): (m.group("l2"), parse_map(m.group("m2")))}
                if m.group("a") not in ends or m.group("b") not in ends:
                    raise ValueError("the relationship's endpoints are not the matched variables")
                (sl, sk), (dl, dk) = ends[m.group("a")], ends[m.group("b")]
                data.rels.append(RelRec(m.group("type"), sl, sk, dl, dk, parse_map(m.group("rm") or ""), st.line))
                continue
            raise ValueError("not a DQA statement (expected CREATE (v:Label {…}) or MATCH (…), (…) CREATE (…)-[…]->(…))")
        except ValueError as exc:
            raise ScriptError(source, st.line, str(exc), st.text) from exc
    return data


# ------------------------------------------------------------------------------------- the fast path

_W = r"[ \t\r\x0b\x0c]*+"  # spacing inside one line (re.ASCII: all but "\n"; possessive, never backtracked)
_BODY = r"\{([^{}\n]*+)\}"    # a map body on one line
_CREATE, _MATCH = "[Cc][Rr][Ee][Aa][Tt][Ee]", "[Mm][Aa][Tt][Cc][Hh]"  # as re.I reads them, a little faster
#: One line of a plain file (searched in "\n" + text + "\n"): a whole-line DQA statement — a node (groups
#: 1-2: label, map) or a relationship (3-12: both matched nodes' variable, label and map, then from-variable,
#: type, map, to-variable) and its ``;`` (13) — or a blank or comment line (all groups empty).
_LINE = re.compile(
    rf"\n(?:{_CREATE}{_W}\({_W}\w*+{_W}:{_W}(\w++){_W}{_BODY}{_W}\)"
    rf"|{_MATCH}{_W}\({_W}(\w*+){_W}:{_W}(\w++){_W}{_BODY}{_W}\){_W},{_W}\({_W}(\w*+){_W}:{_W}(\w++){_W}{_BODY}{_W}\)"
    rf"{_W}{_CREATE}{_W}\({_W}(\w++){_W}\){_W}-{_W}\[{_W}\w*+{_W}:{_W}(\w++){_W}(?:{_BODY})?{_W}\]{_W}->{_W}"
    rf"\({_W}(\w++){_W}\)){_W}(;?){_W}(?=\n)"
    r"|\n(?u:[^\S\n]*+)(?://[^\n]*+)?(?=\n)",  # (Unicode spacing here, as str.strip sees a blank line)
    re.ASCII,  # faster; a statement with non-ASCII names or spacing is left to the general path
)
_KEY_NAME = re.compile(r"[A-Za-z_]\w*")


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is no Cypher value")


def _json_maps(bodies: list[str]) -> dict[str, dict[str, Any]] | None:
    """Every distinct non-empty body -> its map, all read by one ``json.loads`` with the keys quoted; None when
    that cannot be trusted (a string holding ``:`` or ``,``, checked by the counts, or a key that is no name)."""
    if not bodies:
        return {}
    joined = "\n".join(bodies)
    if "\\" in joined or "[" in joined:
        return None
    text = joined.replace(", ", ",").replace(",", ',"').replace(":", '":').replace("\n", '},{"')
    try:
        loaded = json.loads('[{"' + text + "}]", parse_constant=_no_constant)
    except ValueError:
        return None
    if len(loaded) != len(bodies):
        return None
    n_keys = sum(map(len, loaded))
    if joined.count(":") != n_keys or joined.count(",") != n_keys - len(bodies):
        return None  # a ':' or ',' inside a string, a repeated key, …
    if not all(map(_KEY_NAME.fullmatch, set().union(*loaded))):
        return None  # spacing around a key, or a key that is no name
    return dict(zip(bodies, loaded))


def _plain_rows(text: str, source: str) -> GraphData | None:
    """The fast path: the records of a file in the plain form (maps with the same text shared), else None."""
    found = _LINE.findall("\n" + text + "\n")
    if len(found) != text.count("\n") + 1:
        return None  # some line is neither a plain one-line statement nor blank nor a comment
    statements = [(no, f) for no, f in enumerate(found, 1) if f[0] or f[9]]
    with_semi = sum(1 for _, f in statements if f[12])
    if with_semi and with_semi * 2 < len(statements):
        return None  # the splitter would read this file in semicolon mode
    distinct = dict.fromkeys([f[1] for _, f in statements if f[0]] + [f[i] for _, f in statements if not f[0] for i in (4, 7, 10)])
    distinct.pop("", None)
    maps = _json_maps(list(distinct))
    if maps is None:  # a map JSON does not read exactly: the general path decides
        return None
    maps[""] = {}
    get = maps.__getitem__
    nodes: list[NodeRec] = []
    rels: list[RelRec] = []
    for no, (label, body, v1, l1, m1, v2, l2, m2, a, rtype, props, b, _) in statements:
        if label:
            nodes.append(NodeRec(label, get(body), no))
            continue
        ends = {v1: (l1, m1), v2: (l2, m2)}  # as parse_statements's: the second variable wins when both are the same
        if a not in ends or b not in ends:
            return None  # not a matched variable: the general path names the error
        (sl, sk), (dl, dk) = ends[a], ends[b]
        rels.append(RelRec(rtype, sl, get(sk), dl, get(dk), get(props), no))
    return GraphData(source, nodes, rels)


# --------------------------------------------------------------------------------------------- entry


def graph_data_from_text(text: str, source: str = "<script>") -> GraphData:
    """Parse a DQA script given as a string (the fast path for a plain file, else the general one)."""
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")  # lines as the splitter counts them
    return _plain_rows(text, source) or parse_statements(split_statements(text, source), source)


def graph_data_from_bytes(data: bytes, source: str = "<script>") -> GraphData:
    """Parse a DQA script given as the bytes of its file (UTF-8, a BOM dropped)."""
    return graph_data_from_text(decode_script(data, source), source)


def read_graph_data(path: str | Path) -> GraphData:
    """Read and parse a DQA ``.cql`` file."""
    return graph_data_from_bytes(read_script_bytes(path), str(path))
