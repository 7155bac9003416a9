"""Knowledge tools: table lineage, skills on demand, and the research subagent."""

from __future__ import annotations

from langchain.tools import ToolRuntime
from langchain_core.tools import tool

from dataseer.knowledge.lineage import describe_lineage
from dataseer.knowledge.research import run_research
from dataseer.knowledge.skills import SkillError
from dataseer.knowledge.skills import load_skill as read_skill
from dataseer.services import services_for
from dataseer.sql.permission_store import allowed_games


@tool
def table_lineage(table: str, runtime: ToolRuntime) -> str:  # noqa: D417  # runtime is injected
    """Upstream tables of a table and a summary of the ETL SQL that builds it.

    Use it to learn where a number comes from, or to choose between look-alike tables.

    Args:
        table: the table name, as listed by search_tables.
    """
    return describe_lineage(services_for(runtime.config).datasource, table)


@tool
def load_skill(name: str, runtime: ToolRuntime) -> str:  # noqa: D417  # runtime is injected
    """Read the full instructions of one skill listed in <skills>, then follow them.

    Args:
        name: the skill name (e.g. "funnel-analysis"), or name@version for a specific version.
    """
    settings = services_for(runtime.config).settings
    try:
        return read_skill(
            name,
            settings.resolved_prompts_dir,
            enabled=settings.skills_enabled,
            disabled=settings.skills_disabled,
        )
    except SkillError as exc:
        return str(exc)


@tool
def research(topic: str, question: str, runtime: ToolRuntime) -> str:  # noqa: D417  # runtime is injected
    """Investigate what happened around a period: ops events and player announcements.

    A research subagent reads the operations calendar and the announcements
    for the games and period named, and reports what overlaps. Results are
    cached for a while, so asking again is cheap.

    Args:
        topic: what to look into, e.g. "星海远征 流水" or "幻境物语 华为 登录转化".
        question: the user's question (it names the period and the games).
    """
    services = services_for(runtime.config)
    settings = services.settings
    from dataseer.models.tiers import chat_model, is_offline

    model = None if is_offline(settings, "analyst") else chat_model(settings, "analyst")
    scene = (runtime.state or {}).get("scene") or (
        (runtime.config or {}).get("configurable") or {}
    ).get("scene")
    allowed = allowed_games(services, runtime.config)
    if allowed is False:
        return (
            "没有数据权限，无法调查 / no data access for this identity, so nothing was researched"
        )
    try:
        result = run_research(
            topic,
            question,
            datasource=services.datasource,
            pack=services.pack,
            today=settings.resolved_today,
            prompts_dir=settings.resolved_prompts_dir,
            model=model,
            scene=scene,
            allowed_games=allowed,
        )
    except ValueError as exc:
        return f"research needs a topic or a question: {exc}"
    return result.text + ("\n(cached)" if result.cached else "")
