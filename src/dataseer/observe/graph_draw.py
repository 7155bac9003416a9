"""Draw the nested graph: ``dataseer graph --out graph.svg|.dot|.mmd``.

The router graph embeds two agent lines, each a graph of its own
(middleware hooks, model, tools). ``get_graph(xray=True)`` flattens them
with ``line:node`` ids; here every such prefix becomes a cluster, so the
drawing shows the lines as boxes inside the router. Mermaid comes from
LangGraph itself; DOT is written here; SVG is DOT rendered by Graphviz's
``dot`` binary, which must be installed (``apt-get install graphviz``).
"""

from __future__ import annotations

import shutil
import subprocess
from collections import defaultdict
from pathlib import Path
from typing import Any

from dataseer.errors import DataseerError

__all__ = ["FORMATS", "GraphDrawError", "draw", "to_dot"]

FORMATS = (".svg", ".dot", ".mmd")


class GraphDrawError(DataseerError):
    """The drawing could not be made (unknown format, no Graphviz)."""


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _label(node_id: str) -> str:
    return node_id.rsplit(":", 1)[-1]


def to_dot(drawable: Any, name: str = "dataseer") -> str:
    """DOT text of a LangGraph drawable graph, one cluster per subgraph prefix."""
    clusters: dict[str, list[str]] = defaultdict(list)
    top: list[str] = []
    for node_id in drawable.nodes:
        prefix, sep, _ = node_id.rpartition(":")
        (clusters[prefix] if sep else top).append(node_id)
    lines = [
        f"digraph {_quote(name)} {{",
        "  rankdir=TB; compound=true;",
        '  node [shape=box, style="rounded,filled", fillcolor="#f4f6fb", fontname="Helvetica"];',
    ]
    for node_id in top:
        shape = ", shape=oval" if node_id in {"__start__", "__end__"} else ""
        lines.append(f"  {_quote(node_id)} [label={_quote(_label(node_id))}{shape}];")
    for index, (prefix, members) in enumerate(sorted(clusters.items())):
        lines.append(f"  subgraph cluster_{index} {{")
        lines.append(f'    label={_quote(prefix)}; style="rounded"; color="#7a8bb5";')
        lines.extend(f"    {_quote(m)} [label={_quote(_label(m))}];" for m in members)
        lines.append("  }")
    for edge in drawable.edges:
        style = ' [style="dashed"]' if edge.conditional else ""
        lines.append(f"  {_quote(edge.source)} -> {_quote(edge.target)}{style};")
    lines.append("}")
    return "\n".join(lines) + "\n"


def draw(graph: Any, out: Path) -> Path:
    """Write the drawing of a compiled graph to ``out``; the suffix picks the format.

    Raises:
        GraphDrawError: unknown suffix, or ``.svg`` without Graphviz ``dot``.
    """
    out = Path(out)
    suffix = out.suffix.lower()
    if suffix not in FORMATS:
        msg = f"unknown drawing format {suffix or '(none)'!r}; use one of {', '.join(FORMATS)}"
        raise GraphDrawError(msg)
    drawable = graph.get_graph(xray=True)
    out.parent.mkdir(parents=True, exist_ok=True)
    if suffix == ".mmd":
        out.write_text(drawable.draw_mermaid(), encoding="utf-8")
        return out
    dot_text = to_dot(drawable)
    if suffix == ".dot":
        out.write_text(dot_text, encoding="utf-8")
        return out
    dot = shutil.which("dot")
    if dot is None:
        msg = (
            "drawing SVG needs Graphviz's `dot` (apt-get install graphviz / brew install "
            "graphviz); or write .dot or .mmd instead"
        )
        raise GraphDrawError(msg)
    done = subprocess.run(
        [dot, "-Tsvg", "-o", str(out)], input=dot_text.encode(), capture_output=True, check=False
    )
    if done.returncode != 0:
        msg = f"dot failed ({done.returncode}): {done.stderr.decode(errors='replace')[:500]}"
        raise GraphDrawError(msg)
    return out


def cmd_graph(args: Any) -> int:
    """``dataseer graph --out FILE``: draw the served graph."""
    import sys

    from dataseer.graph import build_graph

    path = draw(build_graph(), Path(args.out))
    sys.stdout.write(f"wrote {path}\n")
    return 0


def add_parser(sub: Any) -> None:
    """Register ``graph`` on the ``dataseer`` sub-parsers."""
    p = sub.add_parser("graph", help="draw the nested graph (.svg needs Graphviz, .dot, .mmd)")
    p.add_argument("--out", default="graph.svg", help="output file; the suffix picks the format")
    p.set_defaults(func=cmd_graph)
