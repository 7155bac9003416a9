"""The LLM-facing tools: thin adapters from tool calls to sql, data and knowledge.

Tools hold no business logic; they translate arguments, call the room that
owns the work, and shape the observation the model reads next.
"""

from dataseer.tools.catalog import search_tables, table_info
from dataseer.tools.plan import think, write_todos
from dataseer.tools.sql import run_sql

LOOKUP_TOOLS = [search_tables, table_info, run_sql]
ANALYSIS_TOOLS = [search_tables, table_info, run_sql, write_todos, think]

__all__ = [
    "ANALYSIS_TOOLS",
    "LOOKUP_TOOLS",
    "run_sql",
    "search_tables",
    "table_info",
    "think",
    "write_todos",
]
