"""Skills: abilities analysts teach dataseer in Markdown, without code.

A skill is a folder ``prompts/skills/<folder>/SKILL.md``: YAML front matter
(``name``, ``description``, ``version``, ``enabled``) and a Markdown body.
The prompt lists only names and descriptions; the model calls
``load_skill(name)`` to read a body when it needs one (progressive
disclosure), so fifty skills cost fifty lines of prompt, not fifty pages.

Several versions of one skill can live side by side (``query-writing`` and
``query-writing-v2``). Which are enabled is decided per environment:
``DATASEER_SKILLS_ENABLED`` / ``DATASEER_SKILLS_DISABLED`` (comma-separated
``name`` or ``name@version``) override each file's ``enabled`` flag; among
the enabled versions of a name the highest wins, and ``name@version`` loads
a specific one.

``lint_skills`` is what ``dataseer skills lint`` and CI run: every field is
present, names are unique per version, and every description says when to
use the skill ("当用户需要…时" / "Use when…") and what it does not do
("本技能不负责…" / "Does not…"), because that is what lets a model choose.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import yaml

from dataseer.errors import KnowledgeError

SKILL_FILE = "SKILL.md"
REQUIRED_FIELDS = ("name", "description", "version", "enabled")
_NAME = re.compile(r"^[a-z][a-z0-9]*(?:-[a-z0-9]+)*$")
_WHEN = re.compile(r"当用户需要.+时|\bUse when\b", re.IGNORECASE)
_NOT = re.compile(r"本技能不负责|\bDoes not\b", re.IGNORECASE)
_FRONT = re.compile(r"\A---\s*\n(.*?)\n---\s*\n?(.*)\Z", re.S)


class SkillError(KnowledgeError):
    """A skill is unknown or its file is malformed."""


@dataclass(frozen=True)
class Skill:
    """One version of one skill."""

    name: str
    description: str
    version: int
    enabled: bool
    body: str
    path: Path

    @property
    def ref(self) -> str:
        """``name@version``, unique across the skills folder."""
        return f"{self.name}@{self.version}"


@dataclass(frozen=True)
class LintProblem:
    """One problem ``lint_skills`` found, with the file it is in."""

    path: Path
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


def parse_skill(path: Path) -> tuple[Skill | None, list[str]]:
    """Parse one ``SKILL.md``; returns the skill (or ``None``) and its problems."""
    problems: list[str] = []
    text = path.read_text(encoding="utf-8")
    match = _FRONT.match(text)
    if match is None:
        return None, ["missing front matter (--- name/description/version/enabled ---)"]
    try:
        meta = yaml.safe_load(match.group(1)) or {}
    except yaml.YAMLError as exc:
        return None, [f"invalid front matter YAML: {exc}"]
    if not isinstance(meta, dict):
        return None, ["front matter must be a mapping"]
    missing = [f for f in REQUIRED_FIELDS if meta.get(f) is None or meta.get(f) == ""]
    if missing:
        return None, [f"missing field(s): {', '.join(missing)}"]
    name, description = str(meta["name"]).strip(), " ".join(str(meta["description"]).split())
    version, enabled = meta["version"], meta["enabled"]
    if not _NAME.match(name):
        problems.append(f"name {name!r} must be lowercase words joined by '-'")
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        problems.append(f"version must be a positive integer, got {version!r}")
        version = 0
    if not isinstance(enabled, bool):
        problems.append(f"enabled must be true or false, got {enabled!r}")
        enabled = False
    if not _WHEN.search(description):
        problems.append("description must say when to use it ('当用户需要…时' or 'Use when…')")
    if not _NOT.search(description):
        problems.append("description must say what it does not do ('本技能不负责…' or 'Does not…')")
    body = match.group(2).strip()
    if not body:
        problems.append("the body is empty")
    folder = path.parent.name
    if folder not in {name, f"{name}-v{version}"}:
        problems.append(f"folder {folder!r} must be {name!r} or '{name}-v{version}'")
    return Skill(name, description, int(version), enabled, body, path), problems


def _split(value: str | Iterable[str] | None) -> set[str]:
    if value is None:
        return set()
    items = value.split(",") if isinstance(value, str) else value
    return {i.strip() for i in items if i.strip()}


class SkillBook:
    """The skills of one folder, with the enablement of one environment applied."""

    def __init__(
        self,
        folder: Path,
        *,
        enabled: str | Iterable[str] | None = None,
        disabled: str | Iterable[str] | None = None,
    ) -> None:
        self.folder = folder
        self.skills: list[Skill] = []
        if folder.is_dir():
            for path in sorted(folder.glob(f"*/{SKILL_FILE}")):
                skill, _problems = parse_skill(path)
                if skill is not None and skill.version > 0:
                    self.skills.append(skill)
        on, off = _split(enabled), _split(disabled)
        self._enabled = {
            s.ref
            for s in self.skills
            if (s.enabled or s.name in on or s.ref in on) and not (s.name in off or s.ref in off)
        }

    def is_enabled(self, skill: Skill) -> bool:
        """Whether this version is enabled in this environment."""
        return skill.ref in self._enabled

    def active(self) -> list[Skill]:
        """The skill in force for each name: its highest enabled version, sorted by name."""
        best: dict[str, Skill] = {}
        for s in self.skills:
            if self.is_enabled(s) and (s.name not in best or s.version > best[s.name].version):
                best[s.name] = s
        return [best[n] for n in sorted(best)]

    def get(self, name: str) -> Skill:
        """The active skill ``name``, or exactly ``name@version`` when a version is given.

        Raises:
            SkillError: no such enabled skill; the message lists the available ones.
        """
        wanted = name.strip()
        if "@" in wanted:
            for s in self.skills:
                if s.ref == wanted and self.is_enabled(s):
                    return s
        else:
            for s in self.active():
                if s.name == wanted:
                    return s
        available = ", ".join(s.name for s in self.active()) or "none"
        msg = f"没有启用的技能 / no enabled skill {name!r}; available: {available}"
        raise SkillError(msg)

    def listing(self) -> str:
        """The prompt lines: one ``- name (vN): when to use it`` per active skill.

        The "does not" half of a description matters for lint and for
        ``load_skill``; the prompt only needs the trigger, which keeps the
        listing short in every loop.
        """
        return "\n".join(
            f"- `{s.name}` (v{s.version}): {_when(s.description)}" for s in self.active()
        )


def _when(description: str) -> str:
    """The trigger part of a description, without its "does not" clause."""
    cut = re.split(r"本技能不负责|Does not|It does not", description, maxsplit=1)[0]
    return cut.strip().rstrip("；;，,") or description


def skill_book(
    prompts_dir: Path, enabled: str | None = None, disabled: str | None = None
) -> SkillBook:
    """The skills under ``prompts_dir/skills`` for this environment's enablement.

    Parsed once per set of file versions: the prompt lists skills on every
    loop, and re-reading the folder each time cost more than the rest of the
    prompt. A new, removed or edited ``SKILL.md`` changes the key.
    """
    folder = prompts_dir / "skills"
    files = sorted(folder.glob(f"*/{SKILL_FILE}")) if folder.is_dir() else []
    versions = tuple((str(p), p.stat().st_mtime_ns) for p in files)
    return _cached_book(folder, enabled, disabled, versions)


@lru_cache(maxsize=16)
def _cached_book(
    folder: Path, enabled: str | None, disabled: str | None, versions: tuple[tuple[str, int], ...]
) -> SkillBook:
    return SkillBook(folder, enabled=enabled, disabled=disabled)


def load_skill(
    name: str, prompts_dir: Path, *, enabled: str | None = None, disabled: str | None = None
) -> str:
    """The body of skill ``name`` (or ``name@version``), headed by its name and version.

    Raises:
        SkillError: no such enabled skill.
    """
    skill = skill_book(prompts_dir, enabled, disabled).get(name)
    return f"# skill {skill.name} v{skill.version}\n\n{skill.body}"


def lint_skills(folder: Path) -> list[LintProblem]:
    """Every problem of the skills under ``folder`` (empty list = clean)."""
    problems: list[LintProblem] = []
    if not folder.is_dir():
        return [LintProblem(folder, "skills folder not found")]
    refs: dict[str, Path] = {}
    for sub in sorted(p for p in folder.iterdir() if p.is_dir()):
        path = sub / SKILL_FILE
        if not path.is_file():
            problems.append(LintProblem(sub, f"missing {SKILL_FILE}"))
            continue
        skill, found = parse_skill(path)
        problems += [LintProblem(path, m) for m in found]
        if skill is None:
            continue
        if skill.ref in refs:
            problems.append(
                LintProblem(path, f"duplicate skill {skill.ref} (also in {refs[skill.ref]})")
            )
        refs.setdefault(skill.ref, path)
    return problems
