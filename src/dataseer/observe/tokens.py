"""A rough token count, the same everywhere dataseer estimates one.

Used where no provider reports usage: the offline analyst's usage metadata,
tool results in the usage accounting, and the context benchmark.
"""

from __future__ import annotations


def estimate_tokens(text: str) -> int:
    """CJK characters count one each; other text one per four characters (rounded up)."""
    cjk = sum(1 for ch in text if "\u4e00" <= ch <= "\u9fff")
    return cjk + (len(text) - cjk + 3) // 4
