"""The resolved question in compact form: what the router tells the model.

Game ids, metric keys and exact dates travel in the prompt as JSON so that an
LLM does not re-derive them and the offline analyst can read them back.
"""

from __future__ import annotations

import json

from dataseer.knowledge.pack import KnowledgePack
from dataseer.knowledge.understand import QuestionSpec


def resolved_json(spec: QuestionSpec) -> str:
    """The resolved question as compact JSON: ids and keys, for the model.

    The offline analyst reads it back with ``spec_from_resolved``; an LLM gets
    exact game ids, metric keys and dates instead of re-deriving them.
    """
    data = spec.to_dict()
    compact = {
        "intent": data["intent"],
        "games": [g.id for g in spec.games],
        "metrics": [m.key for m in spec.metrics],
        "period": data["period"],
        "compare_to": data["compare_to"],
        "dimensions": data["dimensions"],
        "filters": data["filters"],
        "unknown_mentions": data["unknown_mentions"],
        "language": data["language"],
    }
    return json.dumps(compact, ensure_ascii=False, separators=(",", ":"))


def spec_from_resolved(text: str, question: str, pack: KnowledgePack) -> QuestionSpec:
    """Rebuild a spec from ``resolved_json`` output, looking ids up in the pack."""
    data = json.loads(text)
    data["text"] = question
    games = [pack.game_by_id(int(i)) for i in data.get("games", [])]
    data["games"] = [g.to_dict() for g in games if g is not None]
    data["metrics"] = [pack.metric(str(k)).to_dict() for k in data.get("metrics", [])]
    return QuestionSpec.from_dict(data)
