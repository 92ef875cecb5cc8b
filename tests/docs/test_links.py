"""Every relative link in the user guide resolves: README.md, ARCHITECTURE.md, docs/*.md and bench/RESULTS.md.

A link is Markdown's `[text](path)`, `[text](path#anchor)`, `[text](#anchor)` or a reference definition
`[label]: path`. Its path must name an existing file or folder, relative to the page; its anchor, when given,
must be a heading of the page it names, slugged as GitHub does (lowercase, spaces to '-', punctuation dropped,
a repeated heading gets -1, -2, …). Links with a scheme (https:, mailto:) and anything inside code (fenced
blocks, `spans`) are not checked.
"""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def pages() -> list[Path]:
    return [
        ROOT / "README.md",
        ROOT / "ARCHITECTURE.md",
        *sorted((ROOT / "docs").glob("*.md")),
        ROOT / "bench" / "RESULTS.md",
    ]


FENCE = re.compile(r"^\s*(```|~~~)")
CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1")
INLINE_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]*)>?(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+\"[^\"]*\")?\s*$")
HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


def prose_lines(text: str) -> list[tuple[int, str]]:
    """The page's lines outside fenced code blocks, numbered from 1."""
    lines, fenced = [], False
    for number, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line):
            fenced = not fenced
        elif not fenced:
            lines.append((number, line))
    return lines


def slug(heading: str) -> str:
    """GitHub's anchor for a heading's text."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link in a heading anchors by its text
    text = text.replace("`", "").replace("*", "").lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    seen: dict[str, int] = {}
    for _, line in prose_lines(page.read_text()):
        match = HEADING.match(line)
        if match:
            base = slug(match.group(2))
            count = seen.get(base, 0)
            seen[base] = count + 1
            seen.setdefault(f"{base}-{count}" if count else base, 1)
    return set(seen)


def links(page: Path) -> list[tuple[int, str]]:
    found = []
    for number, line in prose_lines(page.read_text()):
        reference = REFERENCE.match(line)
        if reference:
            found.append((number, reference.group(1)))
            continue
        for match in INLINE_LINK.finditer(CODE_SPAN.sub("", line)):
            found.append((number, match.group(1)))
    return found


def broken_links(page: Path) -> list[str]:
    """One line per link of `page` that does not resolve: page:line: target: why."""
    problems = []
    for number, target in links(page):
        if not target or SCHEME.match(target):
            continue
        path, _, anchor = target.partition("#")
        named = (page.parent / path).resolve() if path else page
        where = f"{page.relative_to(ROOT) if page.is_relative_to(ROOT) else page}:{number}: {target}"
        if not named.exists():
            problems.append(f"{where}: no such file")
        elif anchor:
            if named.is_dir() or named.suffix != ".md":
                problems.append(f"{where}: an anchor into something that is not a Markdown page")
            elif anchor not in anchors(named):
                problems.append(f"{where}: no heading with that anchor in {named.name}")
    return problems


@pytest.mark.parametrize("page", pages(), ids=lambda page: str(page.relative_to(ROOT)))
def test_every_relative_link_resolves(page: Path) -> None:
    assert page.exists(), f"{page.relative_to(ROOT)} is missing"
    problems = broken_links(page)
    assert not problems, "broken links:\n" + "\n".join(problems)


def test_the_guide_has_pages() -> None:
    assert len(pages()) > 3, "docs/ has no pages"


def test_headings_anchor_as_on_github() -> None:
    assert slug("The first `pulumi up`, on a simulated new VM") == "the-first-pulumi-up-on-a-simulated-new-vm"
    assert slug("Layers (imports go downwards only)") == "layers-imports-go-downwards-only"
    assert slug("Storage that can be local or `gs://`: `workload/run/storage.py`") == (
        "storage-that-can-be-local-or-gs-workloadrunstoragepy"
    )
    assert slug("Mutation runs: would a test notice a lost protection?") == (
        "mutation-runs-would-a-test-notice-a-lost-protection"
    )


def test_a_broken_link_is_reported(tmp_path: Path) -> None:
    (tmp_path / "other.md").write_text("# Other page\n\n## Twice\n\n## Twice\n")
    page = tmp_path / "page.md"
    page.write_text(
        "# Page\n\n"
        "[fine](other.md) [fine](other.md#other-page) [fine](other.md#twice-1) [fine](#page)\n"
        "[external](https://example.com/nowhere.md) `[in code](missing.md)`\n"
        "```\n[in a fence](missing.md)\n```\n"
        "[gone](missing.md)\n"
        "[no anchor](other.md#elsewhere)\n"
        "[here](#nowhere)\n"
        "[ref]: gone-too.md\n"
    )
    assert broken_links(page) == [
        f"{page}:8: missing.md: no such file",
        f"{page}:9: other.md#elsewhere: no heading with that anchor in other.md",
        f"{page}:10: #nowhere: no heading with that anchor in page.md",
        f"{page}:11: gone-too.md: no such file",
    ]
