"""Reading DQA's ``.cql`` scripts into plain records in file order (the annotator's tie-breaking
depends on it, and a graph engine does not promise it), without a graph engine.

DQA's two statement shapes, ``CREATE (var:Label {…})`` and ``MATCH (a:L1 {…}), (b:L2 {…}) CREATE
(a)-[r:TYPE {…}]->(b)``, with the spacing variants real files have, are parsed on top of
:mod:`ragplan.tools.graphdb.script`'s statement splitter; anything else names its file and line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from ragplan.tools.graphdb.script import ScriptError, Statement, decode_script, read_script_bytes, split_statements

__all__ = ["NodeRec", "RelRec", "GraphData", "parse_map", "parse_statements", "read_graph_data",
           "graph_data_from_text", "graph_data_from_bytes"]


@dataclass
class NodeRec:
    """A created node: its label and properties."""

    label: str
    props: dict[str, Any]
    line: int = 0


@dataclass
class RelRec:
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
    """All nodes and relationships of a script, in file order."""

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
_WORDS = {"true": True, "false": False, "null": None}


def _unescape(s: str) -> str:
    if "\\" not in s:
        return s
    return re.sub(r"\\(.)", lambda m: {"n": "\n", "t": "\t"}.get(m.group(1), m.group(1)), s)


@lru_cache(maxsize=65536)
def _parse_items(text: str) -> tuple[tuple[str, Any], ...]:
    """The items of a map body, parsed once per distinct body text."""
    out: list[tuple[str, Any]] = []
    pos, n = 0, len(text)
    while pos < n and text[pos:].strip():
        km = _KEY.match(text, pos)
        if not km:
            raise ValueError(f"expected a property name at {text[pos:pos + 20]!r}")
        key = km.group(1).strip("`")
        vm = _VALUE.match(text, km.end())
        if not vm:
            raise ValueError(f"expected a value for {key!r} at {text[km.end():km.end() + 20]!r}")
        if vm.group("dq") is not None or vm.group("sq") is not None:
            val: Any = _unescape(vm.group("dq") if vm.group("dq") is not None else vm.group("sq"))
        elif vm.group("num") is not None:
            t = vm.group("num")
            val = float(t) if any(c in t for c in ".eE") else int(t)
        else:
            val = _WORDS[vm.group("word").lower()]
        out.append((key, val))
        pos = vm.end()
        if pos < n and text[pos] == ",":
            pos += 1
        elif text[pos:].strip():
            raise ValueError(f"expected ',' at {text[pos:pos + 20]!r}")
    return tuple(out)


def parse_map(text: str) -> dict[str, Any]:
    """Parse a Cypher map literal body (``name:"a", x: 1.5, ok:true``) into a dict; ValueError if malformed."""
    return dict(_parse_items(text))


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


def graph_data_from_text(text: str, source: str = "<script>") -> GraphData:
    """Parse a DQA script given as a string."""
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")  # lines as the splitter counts them
    return parse_statements(split_statements(text, source), source)


def graph_data_from_bytes(data: bytes, source: str = "<script>") -> GraphData:
    """Parse a DQA script given as the bytes of its file (UTF-8, a BOM dropped)."""
    return graph_data_from_text(decode_script(data, source), source)


def read_graph_data(path: str | Path) -> GraphData:
    """Read and parse a DQA ``.cql`` file."""
    return graph_data_from_bytes(read_script_bytes(path), str(path))
