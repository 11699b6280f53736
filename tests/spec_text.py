"""
The normative sentences of the AG-UI specification pages, read from the bundled reference.

The pages are Markdown (MDX) written in BCP 14 language: a sentence carrying MUST, MUST NOT,
REQUIRED, SHALL, SHALL NOT, SHOULD, SHOULD NOT, RECOMMENDED, NOT RECOMMENDED, MAY or
OPTIONAL, in capitals, states a requirement (or a permission a peer must tolerate).
:func:`statements` splits every page into sentences and keeps those, each normalised the
way ``docs/spec-coverage.toml`` writes them, so the test can match the two both ways:

* front matter, fenced code (examples, diagrams) and JSX tags are dropped (a ``<Note>``'s
  prose is kept);
* a paragraph, a list item (with its wrapped lines) and a table row are each one block, and
  a block's lines are joined with single spaces;
* a link keeps its text, ``**bold**`` and ``*emphasis*`` lose their markers, code spans
  keep their backticks;
* a block is split into sentences after ``.``, ``!`` or ``?`` followed by a space and a
  capital, a digit, a backtick, a quote or an opening bracket.

The pages live beside the repository in ``../shared/reference/upstream/docs/spec/<version>``
(:data:`tests.corpus.UPSTREAM_DOCS`); nothing here is vendored.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import attrs

KEYWORD = re.compile(
    r"\b(?:MUST NOT|MUST|REQUIRED|SHALL NOT|SHALL|SHOULD NOT|SHOULD|NOT RECOMMENDED|"
    r"RECOMMENDED|MAY|OPTIONAL)\b"
)
"""The BCP 14 key words; only capitals count (RFC 8174)."""

_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_ITEM = re.compile(r"^(\s*)(?:[-*+]|\d+\.)\s+(.*)$")
_FENCE = re.compile(r"^\s*(```|~~~)")
_JSX = re.compile(r"^\s*</?[A-Z][A-Za-z]*(\s[^>]*)?/?>\s*$|^\s*\{/\*.*\*/\}\s*$")
_LINK = re.compile(r"\[([^\]]*)\]\([^)]*\)")
_SPLIT = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9`\"'(\[*])")


@attrs.frozen
class Statement:
    """One normative sentence: its page (relative path without ``.mdx``), section, text."""

    page: str
    section: str
    text: str


def _inline(text: str) -> str:
    """Markdown inline markup removed outside code spans; whitespace collapsed."""
    parts = re.split(r"(`[^`]*`)", text)
    out: list[str] = []
    for part in parts:
        if part.startswith("`") and part.endswith("`") and len(part) > 1:
            out.append(part)
            continue
        part = _LINK.sub(r"\1", part)
        part = part.replace("**", "")
        part = re.sub(r"(?<![\w*])\*(?=\S)([^*]+?)(?<=\S)\*(?![\w*])", r"\1", part)
        out.append(part)
    joined = "".join(out)
    # A link whose text is a code span: ``[`Tool`](/spec/…)`` leaves the span behind whole.
    joined = _LINK.sub(r"\1", joined)
    return re.sub(r"\s+", " ", joined).strip()


def normalise(text: str) -> str:
    """The form a sentence is written in the matrix: markup removed, whitespace collapsed."""
    return _inline(text)


def _blocks(source: str) -> Iterator[tuple[str, str]]:
    """``(section, block text)`` for every prose block of one page, in order."""
    lines = source.splitlines()
    if lines and lines[0].strip() == "---":
        end = next(i for i in range(1, len(lines)) if lines[i].strip() == "---")
        lines = lines[end + 1 :]
    section = ""
    block: list[str] = []
    in_fence = False

    def flush() -> Iterator[tuple[str, str]]:
        if block:
            yield section, " ".join(line.strip() for line in block)
            block.clear()

    for line in lines:
        if _FENCE.match(line):
            yield from flush()
            in_fence = not in_fence
            continue
        if in_fence:
            continue
        if not line.strip() or _JSX.match(line):
            yield from flush()
            continue
        heading = _HEADING.match(line)
        if heading:
            yield from flush()
            section = _inline(heading[2])
            continue
        if line.lstrip().startswith("|"):
            yield from flush()
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if not all(re.fullmatch(r":?-+:?", c) for c in cells):
                yield section, " | ".join(cells)
            continue
        item = _ITEM.match(line)
        if item:
            yield from flush()
            block.append(item[2])
            continue
        block.append(line)
    yield from flush()


def sentences(source: str) -> Iterator[tuple[str, str]]:
    """``(section, sentence)`` for every sentence of one page's prose, normalised."""
    for section, text in _blocks(source):
        for sentence in _SPLIT.split(_inline(text)):
            if sentence:
                yield section, sentence


def page_name(root: Path, path: Path) -> str:
    """``basic/patterns/streaming`` for ``<root>/basic/patterns/streaming.mdx``."""
    return path.relative_to(root).with_suffix("").as_posix()


def pages(root: Path) -> list[Path]:
    """Every page of one specification version, in a stable order."""
    return sorted(root.rglob("*.mdx"))


def statements(root: Path) -> list[Statement]:
    """Every sentence carrying a BCP 14 key word, page by page, in document order."""
    return [
        Statement(page_name(root, path), section, sentence)
        for path in pages(root)
        for section, sentence in sentences(path.read_text(encoding="utf-8"))
        if KEYWORD.search(sentence)
    ]
