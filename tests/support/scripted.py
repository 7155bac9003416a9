"""A scripted tool-calling chat model: the LLM's side of a conversation, nothing more.

Each model call pops the next scripted reply; every request (system prompt
and messages) is recorded so tests can assert what the model was shown.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import Field

_ids = itertools.count(1)

Reply = AIMessage | Callable[[list[BaseMessage]], AIMessage]


def tool_call(name: str, **args: Any) -> AIMessage:
    """A scripted reply that calls one tool."""
    return AIMessage(
        "",
        tool_calls=[{"name": name, "args": args, "id": f"call_{next(_ids)}", "type": "tool_call"}],
    )


def text(content: str) -> AIMessage:
    """A scripted final reply."""
    return AIMessage(content)


class ScriptedChatModel(BaseChatModel):
    """Replies from a script; records every request it receives."""

    script: list[Any] = Field(default_factory=list)
    requests: list[list[BaseMessage]] = Field(default_factory=list)
    bound_tools: list[str] = Field(default_factory=list)
    repeat_last: bool = False

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ScriptedChatModel:
        from langchain_core.utils.function_calling import convert_to_openai_tool

        self.bound_tools = [convert_to_openai_tool(t)["function"]["name"] for t in tools]
        return self

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: Any = None,
        **kwargs: Any,
    ) -> ChatResult:
        self.requests.append(list(messages))
        if not self.script:
            raise AssertionError("the scripted model ran out of replies")
        reply = (
            self.script[0] if (self.repeat_last and len(self.script) == 1) else self.script.pop(0)
        )
        message = reply(messages) if callable(reply) else reply.model_copy(deep=True)
        if message.tool_calls:
            message.tool_calls = [{**c, "id": f"call_{next(_ids)}"} for c in message.tool_calls]
        return ChatResult(generations=[ChatGeneration(message=message)])
