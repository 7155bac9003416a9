"""Map semantic tiers (router, analyst, summarizer) to chat models.

A tier's model name comes from settings (``DATASEER_MODEL_<TIER>`` or
``DATASEER_MODEL``). With ``DATASEER_BASE_URL`` the name is sent as-is to an
OpenAI-compatible endpoint; otherwise it is an ``init_chat_model`` name such
as ``openai:gpt-4o`` or ``deepseek:deepseek-chat``. With no name at all, the
offline analyst answers: a real mode, not a mock.
"""

from __future__ import annotations

from typing import Any

from langchain_core.language_models import BaseChatModel

from dataseer.config import Settings
from dataseer.errors import ModelError


def is_offline(settings: Settings, tier: str = "analyst") -> bool:
    """Whether this tier falls back to the offline analyst."""
    return settings.model_for(tier) is None


def chat_model(settings: Settings, tier: str = "analyst") -> BaseChatModel:
    """The chat model for a tier.

    Raises:
        ModelError: the configured provider cannot be built (missing package or key).
    """
    name = settings.model_for(tier)
    if name is None:
        from dataseer.models.offline import OfflineAnalyst

        return OfflineAnalyst()
    try:
        if settings.base_url:
            from langchain_openai import ChatOpenAI

            return ChatOpenAI(
                model=name.split(":", 1)[1] if name.startswith("openai:") else name,
                base_url=settings.base_url,
                api_key=settings.api_key or "not-needed",  # type: ignore[arg-type]
                temperature=0,
                stream_usage=True,
                max_retries=2,
                timeout=120,
            )
        from langchain.chat_models import init_chat_model

        kwargs: dict[str, Any] = {"temperature": 0}
        if settings.api_key:
            kwargs["api_key"] = settings.api_key
        return init_chat_model(name, **kwargs)
    except Exception as exc:
        msg = (
            f"cannot build chat model {name!r} for tier {tier}: {type(exc).__name__}: {exc}. "
            "Set DATASEER_MODEL / DATASEER_BASE_URL / DATASEER_API_KEY, or unset them to use "
            "the offline analyst."
        )
        raise ModelError(msg) from exc
