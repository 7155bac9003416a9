"""The dataseer tool provider: checks the server URL, token and thread database."""

from __future__ import annotations

from typing import Any

from dify_plugin import ToolProvider
from dify_plugin.errors.tool import ToolProviderCredentialValidationError

from dataseer_dify.bridge import check_server, client_for
from dataseer_dify.threads import ThreadMap


class DataseerProvider(ToolProvider):
    """Validates credentials by talking to the server and the thread database."""

    def _validate_credentials(self, credentials: dict[str, Any]) -> None:
        try:
            check_server(client_for(credentials["server_url"], credentials["api_token"], 30.0))
            ThreadMap(credentials["threads_database_url"]).setup()
        except Exception as exc:
            raise ToolProviderCredentialValidationError(f"{type(exc).__name__}: {exc}") from exc
