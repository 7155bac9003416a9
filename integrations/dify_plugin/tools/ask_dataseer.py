"""The ``ask_dataseer`` tool: one question in, dataseer's streamed answer out."""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

from dify_plugin import Tool
from dify_plugin.entities.tool import ToolInvokeMessage

from dataseer_dify.bridge import ask, client_for
from dataseer_dify.threads import ThreadMap


class AskDataseerTool(Tool):
    """Streams markdown text messages and chart blobs; follow-ups share a thread."""

    def _invoke(self, tool_parameters: dict[str, Any]) -> Generator[ToolInvokeMessage, None, None]:
        question = str(tool_parameters.get("query") or "").strip()
        if not question:
            yield self.create_text_message("请提供问题 / Please give a question.")
            return
        credentials = self.runtime.credentials
        conversation = str(
            tool_parameters.get("conversation_id") or self.session.conversation_id or ""
        )
        thread_id = (
            ThreadMap(credentials["threads_database_url"]).thread_for(conversation)
            if (conversation)
            else None
        )
        client = client_for(credentials["server_url"], credentials["api_token"])
        thinking = tool_parameters.get("show_thinking")
        charts = 0
        for piece in ask(
            client,
            question,
            thread_id,
            thinking=True if thinking is None else bool(thinking),
            metadata={"conversation_id": conversation} if conversation else None,
        ):
            if piece.text:
                yield self.create_text_message(piece.text)
            else:
                charts += 1
                yield self.create_blob_message(
                    piece.png, meta={"mime_type": "image/png", "filename": f"chart-{charts}.png"}
                )
