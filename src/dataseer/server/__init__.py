"""Serving dataseer: the LangGraph dev server wrapper (auth and routes come later)."""
