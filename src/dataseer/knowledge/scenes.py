"""Scenes: recurring analysis situations with the knowledge a senior analyst brings.

A scene is ``prompts/scenes/<key>.md``: front matter (``key``, ``title``,
``keywords``, optional ``intents`` and ``metrics`` used to detect it) and
three sections — exploration path, SQL notes, common tables. When a run's
config names a scene (``configurable.scene``) or the router detects one, its
body goes into the prompt's ``<scene_knowledge>`` partition, so the model
starts where an expert would instead of rediscovering the warehouse.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

from dataseer.errors import KnowledgeError

SECTIONS = (
    ("exploration path", re.compile(r"^##\s.*(?:探索路径|exploration path)", re.I | re.M)),
    ("SQL notes", re.compile(r"^##\s.*(?:SQL\s*注意事项|SQL notes)", re.I | re.M)),
    ("common tables", re.compile(r"^##\s.*(?:常用表|common tables)", re.I | re.M)),
)
_FRONT = re.compile(r"\A---\s*\n(.*?)\n---\s*\n?(.*)\Z", re.S)


class SceneError(KnowledgeError):
    """A scene file is missing, malformed or lacks a section."""


@dataclass(frozen=True)
class Scene:
    """One scene: how it is recognised and what it teaches."""

    key: str
    title: str
    keywords: tuple[str, ...]
    intents: tuple[str, ...]
    metrics: tuple[str, ...]
    body: str


def parse_scene(path: Path) -> Scene:
    """Read and check one scene file.

    Raises:
        SceneError: no front matter, no key, or a missing section.
    """
    match = _FRONT.match(path.read_text(encoding="utf-8"))
    if match is None:
        msg = f"{path}: missing front matter"
        raise SceneError(msg)
    meta: Any = yaml.safe_load(match.group(1)) or {}
    if not isinstance(meta, dict) or not meta.get("key"):
        msg = f"{path}: front matter needs a key"
        raise SceneError(msg)
    body = match.group(2).strip()
    missing = [name for name, pattern in SECTIONS if not pattern.search(body)]
    if missing:
        msg = f"{path}: missing section(s): {', '.join(missing)}"
        raise SceneError(msg)

    def strs(field: str) -> tuple[str, ...]:
        return tuple(str(v) for v in meta.get(field) or ())

    return Scene(
        key=str(meta["key"]),
        title=str(meta.get("title", meta["key"])),
        keywords=strs("keywords"),
        intents=strs("intents"),
        metrics=strs("metrics"),
        body=body,
    )


@lru_cache(maxsize=16)
def _scenes(folder: Path, stamp: tuple[float, ...]) -> dict[str, Scene]:
    return {s.key: s for s in (parse_scene(p) for p in sorted(folder.glob("*.md")))}


def list_scenes(prompts_dir: Path) -> dict[str, Scene]:
    """Every scene under ``prompts_dir/scenes`` by key (reloaded when a file changes)."""
    folder = prompts_dir / "scenes"
    if not folder.is_dir():
        return {}
    stamp = tuple(p.stat().st_mtime for p in sorted(folder.glob("*.md")))
    return _scenes(folder, stamp)


def load_scene(key: str, prompts_dir: Path) -> Scene:
    """The scene ``key``.

    Raises:
        SceneError: no such scene; the message lists the known ones.
    """
    scenes = list_scenes(prompts_dir)
    if key not in scenes:
        msg = f"unknown scene {key!r}; known: {', '.join(sorted(scenes)) or 'none'}"
        raise SceneError(msg)
    return scenes[key]


def detect_scene(
    question: str,
    prompts_dir: Path,
    *,
    intent: str | None = None,
    metrics: tuple[str, ...] = (),
) -> str | None:
    """The scene a question belongs to, or ``None``.

    A scene scores one point per keyword found in the question, one when the
    question's intent is one of the scene's intents, and one more when it
    also names one of the scene's metrics; the best scene with at least two
    points wins (one keyword or the intent alone is not enough).
    """
    lowered = question.lower()
    best: tuple[int, str] | None = None
    for scene in list_scenes(prompts_dir).values():
        score = sum(1 for k in scene.keywords if k.lower() in lowered)
        if intent and intent in scene.intents:
            score += 1
            if set(metrics) & set(scene.metrics):
                score += 1
        if score >= 2 and (best is None or score > best[0]):
            best = (score, scene.key)
    return best[1] if best else None


def scene_knowledge(key: str | None, prompts_dir: Path) -> str:
    """The ``<scene_knowledge>`` body for a scene key ('' for none or an unknown key)."""
    if not key:
        return ""
    scene = list_scenes(prompts_dir).get(key)
    if scene is None:
        return ""
    return f"scene: {scene.key} — {scene.title}\n\n{scene.body}"
