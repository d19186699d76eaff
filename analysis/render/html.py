"""One self-contained HTML page: tables, notes and plots (PNG embedded as data: URIs), no server,
no external file, no script; opens from a login node's scp'd copy in any browser.

The page fits its window: every table sits in its own box that scrolls sideways when the table
is wider than the page (a 30-column loader table on a laptop), long paths wrap, images shrink
to the page's width. tests/analysis/test_browser.py checks this in a headless Chromium.
"""

from __future__ import annotations

import base64
import html
from collections.abc import Sequence
from dataclasses import dataclass

STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 80em; padding: 0 1em;
  color: #222; overflow-wrap: anywhere; }
h1 { font-size: 1.4em; } h2 { font-size: 1.15em; margin-top: 2em; border-bottom: 1px solid #ccc; }
h3 { font-size: 1em; margin: 1.2em 0 0.3em; }
.scroll { overflow-x: auto; max-width: 100%; margin: 0.5em 0; }
table { border-collapse: collapse; font-size: 0.85em; }
th, td { border: 1px solid #ddd; padding: 0.2em 0.5em; text-align: right; white-space: nowrap;
  overflow-wrap: normal; }
th { background: #f3f3f3; } tr:nth-child(even) td { background: #fafafa; }
td:first-child, th:first-child { text-align: left; font-family: monospace; }
table.text td, table.text th { text-align: left; white-space: normal; min-width: 8em; }
table.text td:first-child { font-family: inherit; font-weight: bold; min-width: 6em; }
table.ladder td:nth-child(2) { text-align: left; }
pre { background: #f7f7f7; padding: 0.6em; font-size: 0.85em; white-space: pre-wrap; }
figure { margin: 1em 0; } figcaption { font-size: 0.85em; color: #555; }
img { max-width: 100%; height: auto; border: 1px solid #eee; }
p.note { font-size: 0.9em; color: #444; } p.verdict { font-weight: bold; }
"""


@dataclass(frozen=True, slots=True)
class Section:
    title: str
    body: str
    """HTML."""


def figure(png: bytes, caption: str) -> str:
    data = base64.b64encode(png).decode("ascii")
    alt = html.escape(caption, quote=True)
    return (
        f'<figure><img src="data:image/png;base64,{data}" alt="{alt}">'
        f"<figcaption>{html.escape(caption)}</figcaption></figure>"
    )


def scroll(table_html: str) -> str:
    """A table in its own box: wider than the page, it scrolls there, not the page."""
    return f'<div class="scroll">{table_html}</div>'


def table(headers: Sequence[str], rows: Sequence[Sequence[str]], css_class: str = "") -> str:
    """A table of plain text cells (escaped here), in its scrolling box. `css_class` "text":
    left-aligned cells that wrap (sentences rather than figures)."""
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in rows)
    attribute = f' class="{html.escape(css_class, quote=True)}"' if css_class else ""
    return scroll(f"<table{attribute}><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>")


def paragraph(text: str, css_class: str = "note") -> str:
    return f'<p class="{css_class}">{html.escape(text)}</p>'


def heading(text: str) -> str:
    return f"<h3>{html.escape(text)}</h3>"


def preformatted(text: str) -> str:
    return f"<pre>{html.escape(text)}</pre>"


def page(title: str, sections: Sequence[Section]) -> str:
    body = "\n".join(f"<h2>{html.escape(s.title)}</h2>\n{s.body}" for s in sections)
    return (
        "<!DOCTYPE html>\n"
        f'<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{html.escape(title)}</title>"
        f"<style>{STYLE}</style></head>\n<body>\n<h1>{html.escape(title)}</h1>\n{body}\n</body></html>\n"
    )
