"""Every relative link of README.md and docs/ leads somewhere: the file exists, and an anchor
names a heading of the page it points to (mkdocs build --strict checks the site's pages; this
checks the README too, and the links from the docs to the repository's own files)."""

from __future__ import annotations

import importlib.util
import os
import posixpath
import re
import subprocess
import sys
import unicodedata
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

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


# The built site: every relative link and asset of every page is a file of the site. The links
# the manual makes to the repository's files (jobs/*.yaml, harness/execution/loop.py, ...) lead to
# the pages scripts/docs_source_pages.py makes of them: the project has no public remote to link to.
SOURCE_PAGES = ROOT / "scripts" / "docs_source_pages.py"


def _source_pages() -> Any:
    spec = importlib.util.spec_from_file_location("docs_source_pages", SOURCE_PAGES)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class _Targets(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.targets: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if name in ("href", "src") and value:
                self.targets.append(value)


def site_broken_links(site: Path) -> list[str]:
    """'page: link' for each relative link or asset of the site's HTML pages that leads to no
    file of the site (a folder counts where it has its index.html)."""
    broken = []
    for html in sorted(site.rglob("*.html")):
        page = html.relative_to(site).as_posix()
        parser = _Targets()
        parser.feed(html.read_text(encoding="utf-8"))
        for target in parser.targets:
            if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith(("#", "//")):
                continue  # https:, mailto:, data: and anchors: not files of the site
            path = target.split("#")[0].split("?")[0]
            if not path:
                continue
            joined = (
                path.lstrip("/") if path.startswith("/") else posixpath.join(posixpath.dirname(page), path)
            )
            dest = posixpath.normpath(joined)
            found = site / dest
            if dest.startswith("..") or not (found.is_file() or (found / "index.html").is_file()):
                broken.append(f"{page}: {target}")
    return broken


def test_the_site_check_finds_a_link_that_leads_nowhere(tmp_path: Path) -> None:
    (tmp_path / "guide").mkdir()
    (tmp_path / "guide" / "index.html").write_text(
        '<a href="../">home</a> <a href="../jobs/x.yaml">gone</a> <img src="../logo.png">'
        ' <a href="https://example.org/y">web</a> <a href="#top">top</a>'
    )
    (tmp_path / "index.html").write_text('<a href="guide/">guide</a> <a href="../../loop.py">out</a>')
    assert site_broken_links(tmp_path) == [
        "guide/index.html: ../jobs/x.yaml",
        "guide/index.html: ../logo.png",
        "index.html: ../../loop.py",
    ]


# The elements MkDocs, Material and the pages' own Markdown make. Any other start tag on a built
# page is a placeholder of the prose (`results/<spec name>/`, `rank<k>.csv`) that the browser
# took for an unknown element and hid.
TAG_WORDS = (
    "a abbr article aside blockquote body br button caption code col colgroup dd del details div dl dt em "
    "figcaption figure footer form h1 h2 h3 h4 h5 h6 head header hr html i img input kbd label li link main "
    "meta nav ol p path pre script small span strong style sub summary sup svg table tbody td th thead title "
    "tr ul"
)
HTML_TAGS = set(TAG_WORDS.split())


def hidden_placeholders(site: Path) -> list[str]:
    found = []

    class Tags(HTMLParser):
        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            if tag not in HTML_TAGS:
                found.append(f"{page.relative_to(site)}: <{tag}{''.join(' ' + k for k, _ in attrs)}>")

    for page in sorted(site.rglob("*.html")):
        Tags().feed(page.read_text())
    return found


def test_a_placeholder_in_angle_brackets_is_found_where_the_browser_would_hide_it(tmp_path: Path) -> None:
    (tmp_path / "index.html").write_text(
        "<p>results/<spec name>/<sweep id>, <code>rank&lt;k&gt;.csv</code>, rank&lt;k&gt;.csv</p>"
    )
    assert hidden_placeholders(tmp_path) == ["index.html: <spec name>", "index.html: <sweep id>"]


def test_the_built_site_has_no_link_that_leads_nowhere(tmp_path: Path) -> None:
    """mkdocs build --strict of this checkout (as scripts/test.sh builds it), then every page's
    links and assets followed on the built site."""
    pytest.importorskip("mkdocs", reason="the docs extra is not installed: pip install -e '.[docs]'")
    site = tmp_path / "site"
    built = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "--site-dir", str(site)],
        cwd=ROOT,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert built.returncode == 0, built.stdout + built.stderr
    assert site_broken_links(site) == []
    assert hidden_placeholders(site) == []
    # The repository's files the manual links to have their pages there.
    assert (site / "source" / "harness" / "execution" / "loop.py" / "index.html").is_file()


@pytest.mark.parametrize(
    "page", sorted((ROOT / "docs").rglob("*.md")), ids=lambda p: str(p.relative_to(ROOT))
)
def test_every_link_out_of_the_docs_is_a_file_the_site_serves(page: Path) -> None:
    """A link that leaves docs/ leads to a repository file, which the site shows on a page of its
    own (a folder, or a file that is not there, would be a 404 on the site)."""
    pages = _source_pages()
    src = page.relative_to(ROOT / "docs").as_posix()
    unserved = [
        f"{src}: {target}"
        for target in pages.links(page.read_text())
        if not re.match(r"^[a-z][a-z0-9+.-]*:", target)
        and not (page.parent / target.partition("#")[0]).resolve().is_relative_to(ROOT / "docs")
        and pages.repository_file(src, target) is None
    ]
    assert unserved == []


def test_links_to_repository_files_lead_to_their_pages() -> None:
    pages = _source_pages()
    markdown = (
        "[loop](../../harness/execution/loop.py#L3) [spec](../reference/spec.md) "
        "`[code](../../jobs/quickstart.yaml)` [web](https://example.org/a.py) [gone](../../nothing.py)\n"
    )
    assert pages.rewrite(markdown, "guides/x.md") == (
        "[loop](../source/harness/execution/loop.py.md) [spec](../reference/spec.md) "
        "`[code](../../jobs/quickstart.yaml)` [web](https://example.org/a.py) [gone](../../nothing.py)\n"
    )
    assert pages.linked_files({"guides/x.md": markdown}) == {"harness/execution/loop.py"}
