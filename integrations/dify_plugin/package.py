"""Build ``dist/<name>-<version>.difypkg`` without the Go ``dify`` CLI, and validate it.

``dify plugin package`` is a Go binary downloaded from GitHub; where it cannot
be had, this does the same documented thing: a zip of the plugin folder
(manifest at the root) minus the ``.difyignore`` patterns. Before zipping,
the manifest, provider and tool YAML are validated with the SDK's own models
(``PluginConfiguration``, ``ToolProviderConfiguration``), so a package that
the daemon would refuse to load fails here instead. The package is unsigned:
install it with signature verification off (``FORCE_VERIFYING_SIGNATURE=false``)
or sign it with ``dify signature sign``.
"""

from __future__ import annotations

import fnmatch
import os
import sys
import zipfile
from pathlib import Path

import yaml
from dify_plugin.core.entities.plugin.setup import PluginConfiguration
from dify_plugin.entities.tool import ToolProviderConfiguration

HERE = Path(__file__).resolve().parent


def ignored(relative: str, patterns: list[str]) -> bool:
    """Whether a path matches a ``.difyignore`` pattern (folder patterns end in '/')."""
    parts = relative.split("/")
    for pattern in patterns:
        if pattern.endswith("/"):
            if pattern.rstrip("/") in parts[:-1] or pattern.rstrip("/") == relative:
                return True
        elif fnmatch.fnmatch(relative, pattern) or fnmatch.fnmatch(parts[-1], pattern):
            return True
    return False


def validate(root: Path = HERE) -> PluginConfiguration:
    """Load every YAML the daemon reads, through the SDK's models."""
    manifest = PluginConfiguration.model_validate(
        yaml.safe_load((root / "manifest.yaml").read_text("utf-8"))
    )
    if not (root / "_assets" / manifest.icon).is_file():
        msg = f"icon {manifest.icon} missing from _assets/"
        raise ValueError(msg)
    cwd = Path.cwd()
    os.chdir(root)  # the SDK resolves tool YAML paths against the working folder
    try:
        for provider_path in manifest.plugins.tools:
            data = yaml.safe_load((root / provider_path).read_text("utf-8"))
            provider = ToolProviderConfiguration.model_validate(data)
            sources = [provider.extra.python.source] + [
                t.extra.python.source for t in provider.tools
            ]
            for source in sources:
                if not (root / source).is_file():
                    msg = f"{provider_path} names {source}, which does not exist"
                    raise ValueError(msg)
    finally:
        os.chdir(cwd)
    if not (root / f"{manifest.meta.runner.entrypoint}.py").is_file():
        msg = "the runner entrypoint module is missing"
        raise ValueError(msg)
    return manifest


def build(root: Path = HERE, out_dir: Path | None = None) -> Path:
    """Validate, then zip the plugin; returns the package path."""
    manifest = validate(root)
    patterns = [
        line.strip()
        for line in (root / ".difyignore").read_text("utf-8").splitlines()
        if line.strip() and not line.startswith("#")
    ]
    out_dir = out_dir or root / "dist"
    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / f"{manifest.name}-{manifest.version}.difypkg"
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as package:
        for path in sorted(root.rglob("*")):
            relative = path.relative_to(root).as_posix()
            if path.is_file() and not ignored(relative, patterns):
                package.write(path, relative)
    return target


if __name__ == "__main__":
    built = build()
    sys.stdout.write(f"{built} ({built.stat().st_size} bytes)\n")
