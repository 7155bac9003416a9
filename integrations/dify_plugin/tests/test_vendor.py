"""The plugin's copy of the stream adapter is the server's, byte for byte."""

from __future__ import annotations

from pathlib import Path

PLUGIN = Path(__file__).resolve().parents[1]
SOURCE = PLUGIN.parents[1] / "src" / "dataseer" / "server" / "stream_adapter.py"


def test_vendored_stream_adapter_is_identical_to_the_source() -> None:
    copy = PLUGIN / "dataseer_dify" / "stream_adapter.py"
    assert copy.read_bytes() == SOURCE.read_bytes(), "run `make -C integrations/dify_plugin vendor`"


def test_the_adapter_needs_only_the_standard_library() -> None:
    imports = [
        line.split()[1]
        for line in SOURCE.read_text("utf-8").splitlines()
        if line.startswith(("import ", "from "))
    ]
    assert imports and all(
        name.split(".")[0] in {"__future__", "json", "collections", "dataclasses", "typing"}
        for name in imports
    )
