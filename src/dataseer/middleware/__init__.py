"""The analysis line's middlewares, one per file, assembled in onion order in ``lines``."""

from dataseer.middleware.base_analysis import BaseAnalysisMiddleware, BaseAnalysisState
from dataseer.middleware.message_cleanup import MessageCleanupMiddleware
from dataseer.middleware.notebook import NotebookMiddleware
from dataseer.middleware.sql_history import SqlHistoryMiddleware
from dataseer.middleware.table_info import TableInfoMiddleware
from dataseer.middleware.think import ThinkMiddleware
from dataseer.middleware.todo import TodoMiddleware
from dataseer.middleware.usage import UsageMiddleware
from dataseer.middleware.verify import VerifyMiddleware

__all__ = [
    "BaseAnalysisMiddleware",
    "BaseAnalysisState",
    "MessageCleanupMiddleware",
    "NotebookMiddleware",
    "SqlHistoryMiddleware",
    "TableInfoMiddleware",
    "ThinkMiddleware",
    "TodoMiddleware",
    "UsageMiddleware",
    "VerifyMiddleware",
]
