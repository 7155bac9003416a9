"""Every guard decision, recorded: who, which SQL, allowed or not, why, when.

Each decision becomes one JSON line in ``DATASEER_HOME/audit/sql-audit.jsonl``
(a ``logging`` file handler; the same line also goes to the
``dataseer.audit`` logger at DEBUG, where operators can attach their own
handlers) and, when a PostgreSQL URL is configured
(``Settings.audit_url``, else ``Settings.database_url``), one row of the
``dataseer_sql_audit`` table.

The record is written *before* the query runs, so a query that crashes the
datasource still leaves its decision behind. A PostgreSQL outage never blocks
queries: the file line is the record of last resort, and the failure is
logged.
"""

from __future__ import annotations

import json
import logging
import threading
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from dataseer.config import Settings
from dataseer.sql.guard import Decision, Permissions

log = logging.getLogger(__name__)

AUDIT_FILE = "sql-audit.jsonl"
AUDIT_LOGGER = "dataseer.audit"

AUDIT_TABLE_DDL = """
CREATE TABLE IF NOT EXISTS dataseer_sql_audit (
    id bigserial PRIMARY KEY,
    at timestamptz NOT NULL,
    user_id text NOT NULL,
    roles text[] NOT NULL,
    layer text NOT NULL,
    dialect text NOT NULL,
    sql text NOT NULL,
    allowed boolean NOT NULL,
    code text NOT NULL,
    reason text NOT NULL,
    tables text[] NOT NULL,
    rewritten_sql text
);
CREATE INDEX IF NOT EXISTS dataseer_sql_audit_user_at ON dataseer_sql_audit (user_id, at);
"""


@dataclass(frozen=True)
class AuditRecord:
    """One guard decision as audited.

    ``layer`` says which check made it: ``middleware`` (the agent's tool
    wrapper) or ``execute`` (the one execution point beneath every path).
    """

    at: str
    user_id: str
    roles: tuple[str, ...]
    layer: str
    dialect: str
    sql: str
    allowed: bool
    code: str
    reason: str
    tables: tuple[str, ...]
    rewritten_sql: str | None

    def to_json(self) -> str:
        """One JSON line (non-ASCII kept readable)."""
        return json.dumps(asdict(self), ensure_ascii=False)


def record_for(
    permissions: Permissions | None,
    sql: str,
    decision: Decision,
    *,
    layer: str,
    dialect: str,
) -> AuditRecord:
    """The audit record of one decision (no identity is audited as ``-``)."""
    return AuditRecord(
        at=datetime.now(UTC).isoformat(timespec="milliseconds"),
        user_id=permissions.user_id if permissions is not None else "-",
        roles=tuple(permissions.roles) if permissions is not None else (),
        layer=layer,
        dialect=dialect,
        sql=sql,
        allowed=decision.allowed,
        code=str(decision.code),
        reason=decision.reason,
        tables=tuple(decision.tables),
        rewritten_sql=decision.rewritten_sql,
    )


_handlers: dict[Path, logging.FileHandler] = {}
_handlers_lock = threading.Lock()


def _file_handler(path: Path) -> logging.FileHandler:
    """One JSON-lines file handler per audit file for the whole process."""
    path = path.resolve()
    with _handlers_lock:
        handler = _handlers.get(path)
        if handler is None:
            path.parent.mkdir(parents=True, exist_ok=True)
            handler = logging.FileHandler(path, encoding="utf-8")
            handler.setFormatter(logging.Formatter("%(message)s"))
            _handlers[path] = handler
        return handler


class SqlAudit:
    """Writes audit records to a JSON-lines file and, optionally, PostgreSQL."""

    def __init__(self, folder: Path, pg_url: str | None = None) -> None:
        self.folder = folder
        self.path = folder / AUDIT_FILE
        self.pg_url = pg_url if pg_url and pg_url.startswith(("postgresql:", "postgres:")) else None
        self._lock = threading.Lock()
        self._conn: Any = None
        self._handler = _file_handler(self.path)

    def _pg(self) -> Any:
        if self._conn is None or self._conn.closed:
            import psycopg

            self._conn = psycopg.connect(str(self.pg_url), autocommit=True, connect_timeout=5)
            self._conn.execute(AUDIT_TABLE_DDL)
        return self._conn

    def record(self, rec: AuditRecord) -> None:
        """Write one record everywhere configured."""
        line = rec.to_json()
        self._handler.handle(
            logging.LogRecord(AUDIT_LOGGER, logging.INFO, __file__, 0, line, None, None)
        )
        logging.getLogger(AUDIT_LOGGER).debug(line)
        if self.pg_url is None:
            return
        with self._lock:
            try:
                self._pg().execute(
                    "INSERT INTO dataseer_sql_audit (at, user_id, roles, layer, dialect, sql, "
                    "allowed, code, reason, tables, rewritten_sql) "
                    "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
                    (
                        rec.at,
                        rec.user_id,
                        list(rec.roles),
                        rec.layer,
                        rec.dialect,
                        rec.sql,
                        rec.allowed,
                        rec.code,
                        rec.reason,
                        list(rec.tables),
                        rec.rewritten_sql,
                    ),
                )
            except Exception as exc:  # the file line already holds the record
                log.warning("SQL audit to PostgreSQL failed: %s: %s", type(exc).__name__, exc)
                self._conn = None

    def close(self) -> None:
        """Close the PostgreSQL connection (file handlers stay for the process)."""
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None


_audits: dict[tuple[str, str], SqlAudit] = {}
_audits_lock = threading.Lock()


def audit_for(settings: Settings) -> SqlAudit:
    """The process's audit sink for these settings (one per folder and URL)."""
    url = settings.audit_url or settings.database_url or ""
    folder = settings.home / "audit"
    key = (str(folder), url)
    with _audits_lock:
        found = _audits.get(key)
        if found is None:
            found = SqlAudit(folder, url or None)
            _audits[key] = found
        return found


def audit_decision(
    settings: Settings,
    permissions: Permissions | None,
    sql: str,
    decision: Decision,
    *,
    layer: str,
    dialect: str,
) -> AuditRecord:
    """Record one decision and return what was recorded."""
    rec = record_for(permissions, sql, decision, layer=layer, dialect=dialect)
    audit_for(settings).record(rec)
    return rec


def read_audit(settings: Settings) -> list[dict[str, Any]]:
    """Every record of the audit file of these settings (oldest first)."""
    path = settings.home / "audit" / AUDIT_FILE
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
