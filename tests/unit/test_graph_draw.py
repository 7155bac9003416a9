"""``dataseer graph``: the nested graph as DOT clusters, Mermaid and SVG."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from dataseer.cli import main
from dataseer.observe.graph_draw import GraphDrawError, draw


def test_dot_has_one_cluster_per_line_and_the_router_nodes(tmp_path: Path) -> None:
    from dataseer.graph import build_graph

    out = draw(build_graph(), tmp_path / "g.dot")
    text = out.read_text()
    assert text.count("subgraph cluster_") == 2
    assert 'label="lookup"' in text and 'label="analysis"' in text
    for node in ('"route"', '"compose"', '"lookup:model"', '"analysis:tools"'):
        assert node in text
    assert '"route" -> "lookup:BaseAnalysisMiddleware.before_agent" [style="dashed"]' in text


def test_mermaid_and_unknown_format(tmp_path: Path) -> None:
    from dataseer.graph import build_graph

    graph = build_graph()
    assert "graph TD" in draw(graph, tmp_path / "g.mmd").read_text()
    with pytest.raises(GraphDrawError):
        draw(graph, tmp_path / "g.png")


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz is not installed")
def test_svg_through_the_cli(tmp_path: Path, sample_path: Path) -> None:
    out = tmp_path / "graph.svg"
    assert main(["graph", "--out", str(out)]) == 0
    assert out.read_text().lstrip().startswith("<?xml") and "<svg" in out.read_text()


def test_tracing_is_off_and_silent_without_all_langfuse_keys() -> None:
    from dataseer.observe.tracing import langfuse_enabled, tracing_callbacks

    assert tracing_callbacks({}) == []
    partial = {"LANGFUSE_PUBLIC_KEY": "pk", "LANGFUSE_SECRET_KEY": "sk"}
    assert not langfuse_enabled(partial)
    assert tracing_callbacks(partial) == []
    assert langfuse_enabled({**partial, "LANGFUSE_HOST": "http://langfuse.internal"})
