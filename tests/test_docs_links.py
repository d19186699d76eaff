"""Every relative link of README.md and docs/ leads somewhere: the file exists, and an anchor
names a heading of the page it points to (mkdocs build --strict checks the site's pages; this
checks the README too, and the links from the docs to the repository's own files)."""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
LINK = re.compile(r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
FENCE = re.compile(r"^( *)(```|~~~).*?^\1\2[ \t]*$", re.M | re.S)
CODE = re.compile(r"`[^`\n]*`")


def prose(text: str) -> str:
    """The page without its code: a link shown in a code block is an example, not a link."""
    return CODE.sub("", FENCE.sub("", text))


def slug(heading: str) -> str:
    """The anchor of a heading, as Python-Markdown's toc (MkDocs) and GitHub make it for the
    headings these pages have: the text without its markup, lower case, punctuation dropped,
    spaces and runs of hyphens one hyphen."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    text = re.sub(r"[`*]", "", text)
    text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    text = re.sub(r"[^\w\s-]", "", text).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def anchors(page: Path) -> set[str]:
    text = FENCE.sub("", page.read_text())
    return {slug(m.group(1)) for m in re.finditer(r"^#{1,6} +(.+?) *#*$", text, re.M)}


def broken_links(page: Path) -> list[str]:
    broken = []
    for m in LINK.finditer(prose(page.read_text())):
        target = m.group(1)
        if re.match(r"^[a-z]+:", target):  # https:, mailto:: not ours to check offline
            continue
        path_part, _, anchor = target.partition("#")
        dest = (page.parent / path_part).resolve() if path_part else page
        if not dest.exists():
            broken.append(f"{target}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            broken.append(f"{target}: {dest.name} has no heading #{anchor}")
    return broken


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_leads_somewhere(page: Path) -> None:
    assert broken_links(page) == []


def test_the_check_finds_a_missing_file_and_a_missing_anchor(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("# A page\n\n## Its part\n")
    page = tmp_path / "b.md"
    page.write_text(
        "[ok](a.md#its-part) [gone](c.md) [no anchor](a.md#nothing) `[code](x.md)`\n"
        "```\n[in a block](y.md)\n```\n[web](https://example.org/z.md)\n"
    )
    assert broken_links(page) == ["c.md: no such file", "a.md#nothing: a.md has no heading #nothing"]


def test_headings_slug_as_the_site_makes_them() -> None:
    assert (
        slug("Tuning: the grid's answer for a fraction of its runs")
        == "tuning-the-grids-answer-for-a-fraction-of-its-runs"
    )
    assert slug("`workload:`") == "workload"
    assert slug("Streams (`IterableDataset`)") == "streams-iterabledataset"
    assert slug("Adaptive repeats — measure until decided") == "adaptive-repeats-measure-until-decided"
