"""The optional self-contained HTML report, and repair of a truncated one.

A report lives between ``<!-- REPORT_HTML_START -->`` and
``<!-- REPORT_HTML_END -->`` in the answer, uses inline styles only (it must
render when pasted anywhere, with no stylesheet or script), and is closed
properly even when the model ran out of tokens half way through.
"""

from __future__ import annotations

import html
from html.parser import HTMLParser

from dataseer.prompt import format_cell
from dataseer.state import SqlRecord

START = "<!-- REPORT_HTML_START -->"
END = "<!-- REPORT_HTML_END -->"
VOID = frozenset({"br", "hr", "img", "meta", "link", "input", "col", "area", "base", "wbr"})
REPORT_WORDS = ("报告", "report", "周报", "月报", "汇报")

_TABLE = "border-collapse:collapse;margin:8px 0;font-size:13px"
_CELL = "border:1px solid #d0d7de;padding:4px 8px;text-align:left"
_HEAD = _CELL + ";background:#f6f8fa"


class _OpenTags(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag not in VOID:
            self.stack.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if tag in self.stack:
            while self.stack and self.stack.pop() != tag:
                pass


def repair_report(text: str) -> tuple[str, bool]:
    """Close a report that was cut off; returns (text, whether it was repaired)."""
    if START not in text or END in text[text.index(START) :]:
        return text, False
    body = text[text.index(START) + len(START) :]
    body = body[: body.rfind(">") + 1] if "<" in body[body.rfind(">") + 1 :] else body
    parser = _OpenTags()
    parser.feed(body)
    closing = "".join(f"</{tag}>" for tag in reversed(parser.stack))
    return text[: text.index(START) + len(START)] + body + closing + "\n" + END, True


def wants_report(question: str) -> bool:
    """Whether the question asks for a report."""
    lowered = question.lower()
    return any(word in lowered for word in REPORT_WORDS)


def _table(record: SqlRecord, max_rows: int = 50) -> str:
    head = "".join(f'<th style="{_HEAD}">{html.escape(c)}</th>' for c in record["columns"])
    rows = "".join(
        "<tr>"
        + "".join(f'<td style="{_CELL}">{html.escape(format_cell(v))}</td>' for v in row)
        + "</tr>"
        for row in record["rows"][:max_rows]
    )
    return f'<table style="{_TABLE}"><tr>{head}</tr>{rows}</table>'


def render_html_report(title: str, summary: str, records: list[SqlRecord]) -> str:
    """A self-contained report: findings, then each query with its table."""
    findings = "".join(
        f"<li>{html.escape(line.lstrip('- ').strip())}</li>"
        for line in summary.splitlines()
        if line.strip()
    )
    sections = []
    for i, rec in enumerate(records, start=1):
        content = (
            _table(rec)
            if rec["ok"]
            else f'<p style="color:#cf222e">{html.escape(str(rec.get("error")))}</p>'
        )
        purpose = html.escape(rec.get("purpose") or "")
        sections.append(
            f'<h3 style="font-size:15px;margin:16px 0 4px">{i}. {purpose}</h3>'
            f'<pre style="background:#f6f8fa;padding:8px;font-size:12px;white-space:pre-wrap">'
            f"{html.escape(rec['sql'])}</pre>{content}"
        )
    return (
        f"{START}\n"
        '<div style="font-family:-apple-system,Segoe UI,sans-serif;color:#24292f;max-width:960px">'
        f'<h2 style="font-size:18px">{html.escape(title)}</h2>'
        f'<ul style="line-height:1.6">{findings}</ul>{"".join(sections)}</div>\n{END}'
    )
