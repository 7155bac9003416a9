"""Skills: front matter, lint cases, enablement per environment, side-by-side versions, CLI."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from dataseer.cli import main
from dataseer.config import PROJECT_ROOT
from dataseer.knowledge.skills import SkillBook, SkillError, lint_skills, load_skill, skill_book

FIXTURES = Path(__file__).parents[1] / "fixtures" / "skills_lint"
CASES: dict[str, list[str]] = yaml.safe_load((FIXTURES / "cases.yaml").read_text(encoding="utf-8"))
SHIPPED = ("schema-exploration", "query-writing", "attribution-analysis", "funnel-analysis",
           "report-generation")  # fmt: skip


@pytest.mark.parametrize("folder", sorted(CASES))
def test_lint_cases(folder: str) -> None:
    problems = [str(p) for p in lint_skills(FIXTURES / folder)]
    expected = CASES[folder]
    assert len(problems) == len(expected), problems
    for fragment in expected:
        assert any(fragment in p for p in problems), (fragment, problems)


def test_shipped_skills_lint_clean_and_are_listed() -> None:
    assert lint_skills(PROJECT_ROOT / "prompts" / "skills") == []
    book = skill_book(PROJECT_ROOT / "prompts")
    assert [s.name for s in book.active()] == sorted(SHIPPED)
    listing = book.listing()
    assert all(f"`{name}`" in listing for name in SHIPPED)
    assert "Use when" in listing and "## Steps" not in listing  # names and descriptions only


def test_two_versions_side_by_side() -> None:
    book = skill_book(PROJECT_ROOT / "prompts")
    assert book.get("query-writing").version == 2
    assert book.get("query-writing@1").version == 1
    assert "Multi-SQL strategies" in load_skill("query-writing", PROJECT_ROOT / "prompts")
    v1 = load_skill("query-writing@1", PROJECT_ROOT / "prompts")
    assert v1.startswith("# skill query-writing v1") and "Multi-SQL" not in v1
    pinned = load_skill("query-writing", PROJECT_ROOT / "prompts", disabled="query-writing@2")
    assert pinned.startswith("# skill query-writing v1")


def test_enablement_per_environment() -> None:
    folder = FIXTURES / "good"
    assert [s.ref for s in SkillBook(folder).active()] == ["alpha@1"]
    assert [s.ref for s in SkillBook(folder, enabled="alpha@2").active()] == ["alpha@2"]
    assert SkillBook(folder, disabled="alpha").active() == []
    assert SkillBook(folder, enabled="alpha", disabled="alpha@1").get("alpha").version == 2
    with pytest.raises(SkillError, match="available: alpha"):
        SkillBook(folder).get("alpha@2")
    with pytest.raises(SkillError, match="no enabled skill 'nope'"):
        SkillBook(folder).get("nope")


def test_a_new_skill_is_a_new_folder(tmp_path: Path) -> None:
    prompts = tmp_path / "prompts"
    shutil.copytree(PROJECT_ROOT / "prompts" / "skills", prompts / "skills")
    (prompts / "skills" / "churn-check").mkdir()
    (prompts / "skills" / "churn-check" / "SKILL.md").write_text(
        "---\nname: churn-check\ndescription: Use when users leave. Does not fix it.\n"
        "version: 1\nenabled: true\n---\nLook at retention first.\n",
        encoding="utf-8",
    )
    assert lint_skills(prompts / "skills") == []
    assert "Look at retention first." in load_skill("churn-check", prompts)


def test_cli_lint(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["skills", "lint"]) == 0
    assert "skills OK" in capsys.readouterr().out
    assert main(["skills", "lint", "--dir", str(FIXTURES / "no-when")]) == 1
    assert "must say when to use it" in capsys.readouterr().out


def test_settings_enablement_reaches_the_prompt(
    monkeypatch: pytest.MonkeyPatch, sample_path: Path
) -> None:
    from dataseer.config import get_settings
    from dataseer.middleware.base_analysis import _skills_listing

    monkeypatch.setenv("DATASEER_SKILLS_DISABLED", "report-generation,query-writing@2")
    listing = _skills_listing(get_settings())
    assert "`report-generation`" not in listing
    assert "`query-writing` (v1)" in listing
