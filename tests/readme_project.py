"""The README's "Add it to your project" section, read as a recipe.

``tests/test_readme_project.py`` builds a project from this text and
nothing else: the section between the ``getting-started`` markers is cut
into its fenced blocks, and each becomes a step, so a change to the README
is a change to what the test builds.

- A ``bash`` block is a list of commands (a trailing ``# comment`` is
  dropped). Only commands of a known shape are accepted (``pip install``,
  ``django-admin startproject``, ``cd``, ``python manage.py …``): a new kind
  of command in the README fails the test until the test learns it, rather
  than being skipped.
- A ``python`` block whose first line is ``# <path>`` is that file's whole
  text; ``# <path>: add at the end`` is appended to the file. A Python block
  without such a line is refused, so the section can't show code a user is
  given no place for.
- Blocks in other languages (the client's ``tsx``) are for the browser; the
  test plays that side with the real ``ai`` package.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"

START = "<!-- --8<-- [start:getting-started] -->"
END = "<!-- --8<-- [end:getting-started] -->"

_FENCE = re.compile(r"^```(\w*)\n(.*?)^```$", re.DOTALL | re.MULTILINE)
_PATH_LINE = re.compile(r"^# (?P<path>[\w./-]+\.py)(?P<append>: add at the end)?\s*$")
_COMMENT = re.compile(r"\s+#\s.*$")


@dataclass(frozen=True)
class Command:
    """A shell command of the section, split into words."""

    argv: tuple[str, ...]

    @property
    def kind(self) -> str:
        argv = self.argv
        if argv[:2] == ("pip", "install"):
            return "pip-install"
        if argv[:2] == ("django-admin", "startproject"):
            return "startproject"
        if argv[0] == "cd" and len(argv) == 2:
            return "cd"
        if argv[:2] == ("python", "manage.py") and len(argv) >= 3:
            return f"manage:{argv[2]}"
        raise ValueError(f"the README's set-up has a command the test does not know: {shlex.join(argv)}")


@dataclass(frozen=True)
class FileText:
    """A file of the project, written or appended to."""

    path: str
    text: str
    append: bool


Step = Command | FileText


def section(text: str | None = None) -> str:
    """The README's getting-started section (markers required: the docs
    site includes the same text)."""
    text = README.read_text(encoding="utf-8") if text is None else text
    start, end = text.find(START), text.find(END)
    if start < 0 or end < start:
        raise ValueError(f"README.md has no {START} … {END} section")
    return text[start + len(START) : end]


def steps(text: str | None = None) -> list[Step]:
    """The section's blocks, in order, as steps."""
    out: list[Step] = []
    for match in _FENCE.finditer(section(text)):
        language, body = match.group(1), match.group(2)
        if language in ("bash", "sh", "shell", "console"):
            for line in body.splitlines():
                line = _COMMENT.sub("", line).strip()
                if line:
                    command = Command(tuple(shlex.split(line)))
                    command.kind  # noqa: B018 - refuses an unknown command now
                    out.append(command)
        elif language == "python":
            first, _, rest = body.partition("\n")
            found = _PATH_LINE.match(first)
            if found is None:
                raise ValueError(f"a Python block of the set-up names no file: {first!r}")
            out.append(FileText(found.group("path"), rest, append=found.group("append") is not None))
    return out
