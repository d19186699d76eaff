"""One self-contained HTML page: tables, notes and plots (PNG embedded as base64), no server,
no external file, no script; opens from a login node's scp'd copy in any browser."""

from __future__ import annotations

import base64
import html
from collections.abc import Sequence
from dataclasses import dataclass

STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 80em; padding: 0 1em; color: #222; }
h1 { font-size: 1.4em; } h2 { font-size: 1.15em; margin-top: 2em; border-bottom: 1px solid #ccc; }
table { border-collapse: collapse; font-size: 0.85em; margin: 0.5em 0; }
th, td { border: 1px solid #ddd; padding: 0.2em 0.5em; text-align: right; white-space: nowrap; }
th { background: #f3f3f3; } tr:nth-child(even) td { background: #fafafa; }
td:first-child, th:first-child { text-align: left; font-family: monospace; }
pre { background: #f7f7f7; padding: 0.6em; overflow-x: auto; font-size: 0.85em; }
figure { margin: 1em 0; } figcaption { font-size: 0.85em; color: #555; }
img { max-width: 100%; border: 1px solid #eee; }
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


def preformatted(text: str) -> str:
    return f"<pre>{html.escape(text)}</pre>"


def page(title: str, sections: Sequence[Section]) -> str:
    body = "\n".join(f"<h2>{html.escape(s.title)}</h2>\n{s.body}" for s in sections)
    return (
        "<!DOCTYPE html>\n"
        f'<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>'
        f"<style>{STYLE}</style></head>\n<body>\n<h1>{html.escape(title)}</h1>\n{body}\n</body></html>\n"
    )
