"""Every reference to the docs points at something that is there.

The package's comments and docstrings, README.md and docs/*.md cite the docs
as ``docs/<file>.md`` (the file), ``docs/<file>.md, "Section"`` or
``docs/<file>.md ("Section")`` (a heading of that file; a second section may
follow, ``, "Another"``) and ``docs/<file>.md#anchor``; the Markdown files also
link ``[text](<file>.md#anchor)`` relative to themselves. A cited section is a
heading's text, matched without its backticks, case and trailing
parenthetical: ``"The model port"`` is ``### The model port (`runs.model`)``.
A citation may run over lines and comment markers (``#``, ``#:``).

``dangling(root)`` reads the files under ``root``, so the same check can be
pointed at another checkout.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from .conftest import ROOT

#: ``docs/<file>.md``, then optionally ``#anchor``.
DOC_FILE = re.compile(r"docs/(?P<file>[A-Za-z0-9_-]+\.md)(?:#(?P<anchor>[A-Za-z0-9_-]+))?")
#: What may follow a file to cite a section: ``, "S"``, ``("S"`` (closed by
#: ``)`` or ``,``) or a space and ``"S"``.
SECTION = re.compile(r'(?P<sep>,[ ]*|[ ]*\([ ]*|[ ]+)"(?P<section>[^"]{1,100})"(?P<after>.?)')
#: A further section after the first: ``, "S"``.
MORE = re.compile(r',[ ]*"(?P<section>[^"]{1,100})"')
#: A Markdown link to a Markdown file or an anchor: ``](x.md#a)``, ``](#a)``.
MD_LINK = re.compile(r"\]\((?P<file>[A-Za-z0-9_./-]*\.md)?(?:#(?P<anchor>[A-Za-z0-9_-]+))?\)")
HEADING = re.compile(r"^(#{1,6})\s+(?P<text>.+?)\s*#*\s*$")
FENCE = re.compile(r"^\s*(```|~~~)")
COMMENT = re.compile(r"^#:?\s?")


@dataclass(frozen=True)
class Reference:
    where: str  # path:line
    target: str  # what is cited, as a reader sees it
    problem: str

    def __str__(self) -> str:
        return f"{self.where}: {self.target}: {self.problem}"


def headings(path: Path) -> list[str]:
    """The headings of a Markdown file, outside code fences."""
    found: list[str] = []
    fenced = False
    for line in path.read_text(encoding="utf-8").splitlines():
        if FENCE.match(line):
            fenced = not fenced
            continue
        match = None if fenced else HEADING.match(line)
        if match:
            found.append(match["text"])
    return found


def section_key(text: str) -> str:
    """A heading or a citation of one, compared: no backticks, no trailing
    parenthetical, whitespace collapsed, case folded."""
    text = " ".join(text.replace("`", "").split())
    text = re.sub(r"\s*\([^()]*\)$", "", text)
    return text.casefold()


def slug(heading: str) -> str:
    """GitHub's anchor of a heading."""
    text = heading.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def flatten(path: Path) -> tuple[str, list[int]]:
    """The file's text with its lines joined by one space (a ``.py`` file's
    comment markers dropped) and the offset where each line starts."""
    parts: list[str] = []
    starts: list[int] = []
    offset = 0
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if path.suffix == ".py":
            line = COMMENT.sub("", line)
        starts.append(offset)
        parts.append(line)
        offset += len(line) + 1
    return " ".join(parts), starts


def sources(root: Path) -> Iterator[Path]:
    yield from sorted((root / "uistream_app").rglob("*.py"))
    yield from sorted((root / "docs").glob("*.md"))
    yield root / "README.md"


def dangling(root: Path) -> list[Reference]:
    """Every reference under ``root`` that points at nothing."""
    docs = root / "docs"
    cache: dict[Path, list[str]] = {}

    def heads(path: Path) -> list[str]:
        if path not in cache:
            cache[path] = headings(path)
        return cache[path]

    found: list[Reference] = []
    for path in sources(root):
        text, starts = flatten(path)

        def where(offset: int, path: Path = path, starts: list[int] = starts) -> str:
            return f"{path.relative_to(root)}:{bisect.bisect_right(starts, offset)}"

        def check(offset: int, target: Path, anchor: str | None, sections: list[str], cited: str) -> None:
            if not target.is_file():
                found.append(Reference(where(offset), cited, "no such file"))
                return
            if anchor is not None and anchor not in {slug(h) for h in heads(target)}:
                found.append(Reference(where(offset), f"{cited}#{anchor}", "no heading has this anchor"))
            keys = {section_key(h) for h in heads(target)}
            for section in sections:
                if section_key(section) not in keys:
                    found.append(Reference(where(offset), f'{cited}, "{section}"', "no such heading"))

        for match in DOC_FILE.finditer(text):
            sections: list[str] = []
            cite = SECTION.match(text, match.end())
            # ``("rule N" in this module…)`` names a rule, not a section: a
            # parenthesised citation is the parenthesis's first element.
            if cite and not ("(" in cite["sep"] and cite["after"] not in (")", ",")):
                sections.append(cite["section"])
                end = cite.end("section") + 1
                while more := MORE.match(text, end):
                    sections.append(more["section"])
                    end = more.end()
            check(match.start(), docs / match["file"], match["anchor"], sections, f"docs/{match['file']}")
        if path.suffix == ".md":
            for link in MD_LINK.finditer(text):
                if link["file"] and link["file"].startswith("docs/"):
                    continue  # read above, as a ``docs/<file>.md`` reference
                target = (path.parent / link["file"]).resolve() if link["file"] else path
                cited = link["file"] or path.name
                check(link.start(), target, link["anchor"], [], f"link {cited}")
    return found


def test_every_docs_reference_points_at_something() -> None:
    problems = dangling(ROOT)
    assert not problems, "references to the docs that point at nothing:\n" + "\n".join(map(str, problems))


def test_the_check_finds_what_it_should(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    guide = "# Guide\n\n## The model port (`runs.model`)\n\n```\n# Not a heading\n```\n"
    (tmp_path / "docs" / "guide.md").write_text(guide)
    (tmp_path / "README.md").write_text("[ok](docs/guide.md#the-model-port-runsmodel) [bad](docs/guide.md#nowhere)\n")
    package = tmp_path / "uistream_app"
    package.mkdir()
    (package / "a.py").write_text(
        '"""See docs/guide.md, "The model\nport"; docs/guide.md ("rule 3" there); docs/missing.md.\n"""\n'
        '# docs/guide.md, "Guide", "Not a\n#: heading".\nx = 1  # (docs/guide.md, "A run")\n'
    )
    assert [str(p) for p in dangling(tmp_path)] == [
        "uistream_app/a.py:2: docs/missing.md: no such file",
        'uistream_app/a.py:4: docs/guide.md, "Not a heading": no such heading',
        'uistream_app/a.py:6: docs/guide.md, "A run": no such heading',
        "README.md:1: docs/guide.md#nowhere: no heading has this anchor",
    ]
