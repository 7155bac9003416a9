"""dataseer: a middleware-based ReAct data-analysis agent server."""

__version__ = "0.1.0"
