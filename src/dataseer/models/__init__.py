"""Chat models: semantic tiers, providers and the offline analyst."""

from dataseer.models.tiers import chat_model, is_offline

__all__ = ["chat_model", "is_offline"]
