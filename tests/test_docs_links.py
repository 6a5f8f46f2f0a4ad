"""README.md is the front page and links the reference pages in docs/: every relative link there
and in docs/*.md must point at a file of this checkout, and a ``#fragment`` into a Markdown page
at one of its headings (GitHub's anchor rule), so moving text between pages cannot leave a dead link.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
_LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
_FENCE = re.compile(r"^```.*?^```", re.M | re.S)


def anchor(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation but ``-`` and ``_`` dropped, spaces to ``-``."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """The anchors of every heading of ``page`` (code blocks left out: a ``#`` there is a comment)."""
    text = _FENCE.sub("", page.read_text(encoding="utf-8"))
    return {anchor(m.group(1)) for m in re.finditer(r"^#{1,6} (.+)$", text, re.M)}


def links(page: Path) -> list[str]:
    """The relative link targets of ``page`` outside code blocks."""
    text = _FENCE.sub("", page.read_text(encoding="utf-8"))
    return [t for t in _LINK.findall(text) if not re.match(r"^[a-z][a-z0-9+.-]*:", t)]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_points_at_an_existing_file_and_heading(page):
    dead = []
    for target in links(page):
        path, _, fragment = target.partition("#")
        where = (page.parent / path).resolve() if path else page
        if not where.exists():
            dead.append(f"{target}: no such file")
        elif fragment and where.suffix == ".md" and fragment not in anchors(where):
            dead.append(f"{target}: no heading with that anchor")
    assert not dead, dead


def test_the_readme_is_a_front_page_that_links_the_reference():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.encode()) < 14_000  # every block complete and runnable as written (issue 37)
    linked = {t.partition("#")[0] for t in links(ROOT / "README.md")}
    for page in ("formats", "robustness", "figures", "scaling", "layout", "cli"):
        assert f"docs/{page}.md" in linked, page


def repeated_passages(text: str, size: int = 6) -> list[str]:
    """The first line of each run of ``size`` consecutive non-blank prose lines that occurs twice in ``text``
    (code blocks left out: generated help repeats each command's common options on purpose)."""
    lines = [line.strip() for line in _FENCE.sub("", text).splitlines() if line.strip()]
    seen: dict[tuple[str, ...], int] = {}
    repeats = []
    for i in range(len(lines) - size + 1):
        run = tuple(lines[i : i + size])
        if run in seen and seen[run] + size <= i:  # a second copy, not an overlap with the first
            repeats.append(run[0])
        seen.setdefault(run, i)
    return repeats


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_page_repeats_a_passage(page):
    assert repeated_passages(page.read_text(encoding="utf-8")) == []
