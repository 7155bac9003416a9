"""The LLM-facing tools: thin adapters from tool calls to sql, data and knowledge.

Tools hold no business logic; they translate arguments, call the room that
owns the work, and shape the observation the model reads next.
"""

from dataseer.tools.catalog import search_tables, table_info
from dataseer.tools.knowledge import load_skill, research, table_lineage
from dataseer.tools.python import run_python
from dataseer.tools.sql import run_sql

LOOKUP_TOOLS = [search_tables, table_info, run_sql]
ANALYSIS_TOOLS = [
    search_tables,
    table_info,
    run_sql,
    run_python,
    table_lineage,
    load_skill,
    research,
]
"""Planning tools (write_todos, think, notebook, sql_task_detail) come with their middlewares."""

__all__ = [
    "ANALYSIS_TOOLS",
    "LOOKUP_TOOLS",
    "load_skill",
    "research",
    "run_python",
    "run_sql",
    "search_tables",
    "table_info",
    "table_lineage",
]
