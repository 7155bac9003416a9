"""The knowledge room: the knowledge pack, retrieval, question understanding, metric SQL.

Everything dataseer knows about the warehouse beyond its catalog lives in a
replaceable folder of YAML files (the pack). This package loads it
(``KnowledgePack``), searches it (``KnowledgeIndex``), reads questions with it
(``understand``) and compiles its metric definitions into SQL
(``compile_metric_sql`` and friends).
"""

from __future__ import annotations

from dataseer.knowledge.metrics import (
    compile_comparison_sql,
    compile_contribution_sql,
    compile_funnel_sql,
    compile_metric_sql,
    compile_ops_events_sql,
)
from dataseer.knowledge.pack import (
    DEFAULT_PACK_DIR,
    Case,
    Dimension,
    Game,
    KnowledgePack,
    Metric,
    TableDoc,
    Term,
)
from dataseer.knowledge.periods import Period, find_periods, parse_period
from dataseer.knowledge.retrieval import Hit, KnowledgeIndex, index_for
from dataseer.knowledge.understand import Filter, Intent, QuestionSpec, understand

__all__ = [
    "DEFAULT_PACK_DIR",
    "Case",
    "Dimension",
    "Filter",
    "Game",
    "Hit",
    "Intent",
    "KnowledgeIndex",
    "KnowledgePack",
    "Metric",
    "Period",
    "QuestionSpec",
    "TableDoc",
    "Term",
    "compile_comparison_sql",
    "compile_contribution_sql",
    "compile_funnel_sql",
    "compile_metric_sql",
    "compile_ops_events_sql",
    "find_periods",
    "index_for",
    "parse_period",
    "understand",
]
