"""The analysis line's middlewares, one per file, assembled in onion order in ``lines``."""

from dataseer.middleware.base_analysis import BaseAnalysisMiddleware, BaseAnalysisState
from dataseer.middleware.message_cleanup import MessageCleanupMiddleware

__all__ = ["BaseAnalysisMiddleware", "BaseAnalysisState", "MessageCleanupMiddleware"]
