"""Packaging: the SDK's models accept the manifest, and the zip has the documented layout."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import package

PLUGIN = Path(__file__).resolve().parents[1]


def test_package_builds_validates_and_imports(tmp_path: Path) -> None:
    built = package.build(PLUGIN, tmp_path)
    assert built.name == "dataseer-0.1.0.difypkg"
    with zipfile.ZipFile(built) as archive:
        names = set(archive.namelist())
        archive.extractall(tmp_path / "unpacked")
    assert {"manifest.yaml", "main.py", "requirements.txt", "_assets/icon.svg"} <= names
    assert {"provider/dataseer.yaml", "provider/dataseer.py", "tools/ask_dataseer.py"} <= names
    assert "dataseer_dify/stream_adapter.py" in names
    assert not [
        n for n in names if n.startswith((".venv/", "tests/", "dist/")) or "__pycache__" in n
    ]
    package.validate(tmp_path / "unpacked")
    check = (
        "import provider.dataseer as p, tools.ask_dataseer as t;"
        "print(p.DataseerProvider.__name__, t.AskDataseerTool.__name__)"
    )
    out = subprocess.run(
        [sys.executable, "-c", check],
        cwd=tmp_path / "unpacked",
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert out.stdout.split() == ["DataseerProvider", "AskDataseerTool"]


def test_a_broken_manifest_is_refused(tmp_path: Path) -> None:
    import shutil

    import pytest

    copy = tmp_path / "plugin"
    shutil.copytree(PLUGIN, copy, ignore=shutil.ignore_patterns(".venv", "dist", "tests"))
    manifest = copy / "manifest.yaml"
    manifest.write_text(manifest.read_text("utf-8").replace("name: dataseer", "name: Data Seer"))
    with pytest.raises(ValueError, match="name"):
        package.validate(copy)
