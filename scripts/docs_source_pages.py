"""The site's pages of repository files: a MkDocs hook (mkdocs.yml's `hooks:`).

The manual links to files of the repository outside docs/ (`../../jobs/detection.yaml`,
`../harness/execution/loop.py`). Read in the repository, such a link leads to the file. The built
site has no repository behind it: the project has no public remote, so there is no `repo_url` to
link to, and those links were 404s. This hook gives each linked file a page of its own on the site
(`source/<path>/`), made at build time from the file as it is, and points the links there. The
pages are made, not kept in git: a copy of a module kept under docs/ would go stale with each
change to the module.

The markdown keeps its links to the repository's files, so that they work on both sides; a link
to a file that does not exist is left alone, and the strict build fails on it (mkdocs.yml:
`validation.links.not_found: warn`). tests/test_docs_links.py checks the built site and the
markdown.
"""

from __future__ import annotations

import posixpath
import re
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
FOLDER = "source"  # where the generated pages sit on the site: source/jobs/detection.yaml/
LANGUAGES = {
    ".py": "python",
    ".yaml": "yaml",
    ".yml": "yaml",
    ".sh": "bash",
    ".sbatch": "bash",
    ".toml": "toml",
}
# Code is skipped: a link shown in a code block or span is an example, not a link.
CODE_OR_LINK = re.compile(
    r"(?P<fence>^(?P<indent> *)(?P<mark>```|~~~).*?^(?P=indent)(?P=mark)[ \t]*$)"
    r"|(?P<code>`[^`\n]*`)"
    r"|(?P<link>\]\((?P<target>[^)\s]+)(?P<title>\s+\"[^\"]*\")?\))",
    re.M | re.S,
)


def repository_file(page: str, target: str) -> str | None:
    """The repository path (from its root, with slashes) that the link `target` of the docs page
    `page` (its path under docs/) leads to, where it leaves docs/ for a file of the repository;
    None for anything else: a web address, an anchor, a page of the site, a path that is no file."""
    if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith(("#", "/")):
        return None
    path = target.partition("#")[0]
    if not path:
        return None
    dest = ((DOCS / page).parent / path).resolve()
    if dest.is_relative_to(DOCS) or not dest.is_relative_to(ROOT) or not dest.is_file():
        return None
    return dest.relative_to(ROOT).as_posix()


def links(markdown: str) -> list[str]:
    """The targets of the page's links, outside its code."""
    return [m["target"] for m in CODE_OR_LINK.finditer(markdown) if m["link"]]


def page_of(path: str) -> str:
    """The generated page's path among the site's documents: source/jobs/detection.yaml.md."""
    return f"{FOLDER}/{path}.md"


def page_text(path: str) -> str:
    """The page that shows the repository's file `path`: a Markdown file as a page, anything else
    in a code block (fenced with more backticks than the file holds in a row)."""
    text = (ROOT / path).read_text(encoding="utf-8")
    head = f"The repository's `{path}`, as this site was built from it."
    if path.endswith(".md"):
        return f"<!-- {head} -->\n\n{text}"
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    language = LANGUAGES.get(Path(path).suffix, "text")
    return f"# `{path}`\n\n{head}\n\n{fence}{language}\n{text.rstrip()}\n{fence}\n"


def linked_files(pages: dict[str, str]) -> set[str]:
    """The repository files that the pages (path under docs/ -> markdown) link to."""
    return {
        path
        for page, markdown in pages.items()
        for target in links(markdown)
        if (path := repository_file(page, target)) is not None
    }


def rewrite(markdown: str, page: str) -> str:
    """The page with each link to a repository file pointed at that file's generated page."""

    def one(m: re.Match[str]) -> str:
        if not m["link"]:
            return m[0]
        path = repository_file(page, m["target"])
        if path is None:
            return m[0]
        # The anchor goes: a file's page has no heading to land on.
        target = posixpath.relpath(page_of(path), posixpath.dirname(page) or ".")
        return f"]({target}{m['title'] or ''})"

    return CODE_OR_LINK.sub(one, markdown)


def on_files(files: Any, config: Any) -> Any:
    from mkdocs.structure.files import File, InclusionLevel

    pages = {f.src_uri: f.content_string for f in files.documentation_pages()}
    for path in sorted(linked_files(pages)):
        files.append(
            File.generated(
                config, page_of(path), content=page_text(path), inclusion=InclusionLevel.NOT_IN_NAV
            )
        )
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    if page.file.src_uri.startswith(f"{FOLDER}/"):
        return markdown
    return rewrite(markdown, page.file.src_uri)
