"""The documentation site's hooks (``mkdocs.yml``: ``hooks``): what the site
takes from the code and the README instead of a copy.

- The settings reference (``reference/settings.md``) is written from
  ``uistream_app.conf``'s ``DEFAULTS`` and ``DESCRIPTIONS`` on every build;
  ``python docs/mkdocs_hooks.py settings`` writes the same text into the
  repository's copy, which a test holds to the code.
- Snippets (``--8<-- "README.md:getting-started"``) are pymdownx.snippets,
  with two additions. A section no ``--8<-- [start:name]`` marker names is
  the heading whose GitHub anchor is ``name``, up to the next heading of its
  level or above, its headings raised so that it opens the page. And the
  links of an included file are written from where that file is: README.md
  links from the repository's root (``docs/architecture.md#error-codes``,
  ``#upgrade-notes``), docs/ from docs/. They become links from the site's
  root (``/architecture.md#error-codes``, which mkdocs checks and makes
  relative), and an anchor of the file outside the included lines goes to
  the page that includes that heading; one no page includes is left as it
  is, for the strict build to fail on.

Anchors are GitHub's (``toc``'s slugify in mkdocs.yml), so a link that works
on GitHub works in the site.
"""

from __future__ import annotations

import importlib.util
import posixpath
import re
import sys
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from markdown import Markdown
from pymdownx.slugs import slugify
from pymdownx.snippets import SnippetExtension, SnippetMissingError, SnippetPreprocessor

ROOT = Path(__file__).resolve().parent.parent
SETTINGS_PAGE = "reference/settings.md"

HEADING = re.compile(r"^(?P<level>#{1,6})\s+(?P<text>.+?)\s*#*\s*$")
FENCE = re.compile(r"^\s*(```|~~~)")
#: An inline link or image's target: ``](target)`` or ``](target "title")``.
LINK = re.compile(r"(?P<open>\]\()(?P<target>[^)\s]+)(?P<close>[)\s])")
SNIPPET = re.compile(r"""^\s*-{1,}8<-{1,}\s+(?P<q>["'])(?P<path>[^"']+?)(?::(?P<section>[A-Za-z][\w-]*))?(?P=q)\s*$""")


# -- Markdown, read the way GitHub reads it -----------------------------------------------


#: The anchors ``toc`` gives headings (mkdocs.yml), which are GitHub's.
_slugify = slugify(case="lower")


def slug(heading: str) -> str:
    """The anchor of a heading written in Markdown (its code spans' text is the text)."""
    return str(_slugify(heading.replace("`", ""), "-"))


def unfenced(lines: Iterable[str]) -> Iterator[tuple[int, str, bool]]:
    """Each line with its index and whether it is outside code fences."""
    fenced = False
    for index, line in enumerate(lines):
        if FENCE.match(line):
            fenced = not fenced
            yield index, line, False
            continue
        yield index, line, not fenced


def headings(lines: Iterable[str]) -> Iterator[tuple[int, int, str]]:
    """The headings outside code fences: (line index, level, text)."""
    for index, line, prose in unfenced(lines):
        match = HEADING.match(line) if prose else None
        if match:
            yield index, len(match["level"]), match["text"]


def section(lines: list[str], name: str) -> list[str] | None:
    """The lines between the ``--8<-- [start:name]`` and ``[end:name]``
    markers, else the heading section ``name``; None when neither is there."""
    start, end = f"--8<-- [start:{name}]", f"--8<-- [end:{name}]"
    begin = next((i for i, line in enumerate(lines) if start in line), None)
    if begin is None:
        return heading_section(lines, name)
    stop = next((i for i, line in enumerate(lines) if end in line), len(lines))
    return lines[begin + 1 : stop]


def heading_section(lines: list[str], name: str) -> list[str] | None:
    """The section opened by the heading whose anchor is ``name``, up to the
    next heading of its level or above, raised so that it opens at level 1;
    None when no heading has that anchor."""
    found = list(headings(lines))
    for position, (start, level, text) in enumerate(found):
        if slug(text) != name:
            continue
        end = next((i for i, lev, _ in found[position + 1 :] if lev <= level), len(lines))
        shift = level - 1
        section = lines[start:end]
        for index, _, _ in headings(section):
            section[index] = section[index][shift:]
        return section
    return None


# -- links -------------------------------------------------------------------------------


def relink(lines: list[str], source: str, to_site: Mapping[tuple[str, str], str], here: str | None) -> list[str]:
    """``lines`` of the repository file ``source`` (``"README.md"``,
    ``"docs/architecture.md"``) with their relative links rewritten for a
    page elsewhere: a file under docs/ as ``here`` (a page's directory in
    docs/, ``"reference"``) sees it, or from the site's root when ``here``
    is None. An anchor of ``source`` outside ``lines`` goes to the page
    ``to_site`` names for it."""
    own = {slug(text) for _, _, text in headings(lines)}

    def rewrite(target: str) -> str:
        if re.match(r"^[a-z][a-z0-9+.-]*:|^/", target):
            return target  # a URL, or already from the site's root
        path, _, anchor = target.partition("#")
        if not path:
            if anchor in own:
                return target
            path = source
        else:
            path = posixpath.normpath(posixpath.join(posixpath.dirname(source), path))
        if not path.startswith("docs/"):
            page = to_site.get((path, anchor))
            if page is None:
                return target  # nothing in the site: the strict build says so
            path = "docs/" + page
        inside = path.removeprefix("docs/")
        new = "/" + inside if here is None else posixpath.relpath(inside, here)
        return f"{new}#{anchor}" if anchor else new

    out = list(lines)
    for index, line, prose in unfenced(lines):
        if prose and "](" in line:
            out[index] = LINK.sub(lambda m: m["open"] + rewrite(m["target"]) + m["close"], line)
    return out


# -- the settings reference --------------------------------------------------------------


def literal(value: object) -> str:
    """A default as a settings file writes it: Python, with double quotes."""
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, list | tuple):
        return "[" + ", ".join(literal(item) for item in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{literal(k)}: {literal(v)}" for k, v in value.items()) + "}"
    return repr(value)


def _read_conf() -> ModuleType:
    """This checkout's uistream_app/conf.py as it is on disk now (``mkdocs
    serve`` rebuilds when it changes): a module of its own, apart from an
    imported ``uistream_app.conf``. It imports nothing of the package."""
    path = ROOT / "uistream_app" / "conf.py"
    spec = importlib.util.spec_from_file_location("_uistream_conf_for_docs", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot read {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def settings_reference() -> str:
    """docs/reference/settings.md: every key of ``UISTREAM`` from
    ``uistream_app.conf``, in the order of ``DEFAULTS``."""
    conf = _read_conf()
    defaults, descriptions = conf.DEFAULTS, conf.DESCRIPTIONS
    undescribed = sorted(set(defaults) - set(descriptions))
    if undescribed:
        raise ValueError(f"uistream_app.conf.DESCRIPTIONS does not describe {', '.join(undescribed)}")
    rows = [
        f"| `{key}` | `{literal(default)}` | {descriptions[key].replace('|', chr(92) + '|')} |"
        for key, default in defaults.items()
    ]
    text = [
        "<!-- Generated from uistream_app/conf.py (DEFAULTS, DESCRIPTIONS) by"
        " `python docs/mkdocs_hooks.py settings`: edit those, not this file. -->",
        "",
        "# Settings",
        "",
        "Every key of the `UISTREAM` dict, its default and what it means. How the",
        "settings are read (typed, cached, dotted paths imported lazily) is in",
        "[Operations, Settings](docs/operations.md#settings); a bad value is a",
        "[system check](docs/operations.md#system-checks) at startup. A view's class",
        "attributes (`model`, `tools`, `tool_approval`, `system_prompt`,",
        "`max_steps`, `sdk_version`, `mcp_servers`) and its `get_*` hooks take",
        "precedence over these defaults.",
        "",
        "| key | default | meaning |",
        "|---|---|---|",
        *rows,
    ]
    here = posixpath.dirname(SETTINGS_PAGE)
    return "\n".join(relink(text, "README.md", {}, here)) + "\n"


# -- snippets ----------------------------------------------------------------------------


class _Snippets(SnippetPreprocessor):
    def __init__(self, config: dict[str, Any], md: Markdown, project: Project) -> None:
        super().__init__(config, md)
        self.project = project

    def select_snippet_lines(self, lines: list[str], target: dict[str, Any]) -> list[str]:
        name = target["section"]
        if name is None:
            return super().select_snippet_lines(lines, target)
        found = section(lines, name)
        if found is None:
            raise SnippetMissingError(f"{target['path']} has no section or heading {name!r}")
        return found

    def process_snippet_lines(self, lines: list[str], target: dict[str, Any]) -> list[str]:
        source = Path(target["snippet"]).resolve().relative_to(self.project.root).as_posix()
        return relink(lines, source, self.project.to_site, None)


class Snippets(SnippetExtension):
    """pymdownx.snippets with heading sections and the links rewritten."""

    def __init__(self, project: Project, **kwargs: Any) -> None:
        self.project = project
        super().__init__(base_path=[str(project.root)], **kwargs)

    def extendMarkdown(self, md: Markdown) -> None:
        super().extendMarkdown(md)
        md.preprocessors.register(_Snippets(self.getConfigs(), md, self.project), "snippet", 32)


def included(root: Path, text: str) -> Iterator[tuple[str, str]]:
    """(included file, anchor of a heading it includes) for each snippet of
    a page's Markdown; the files are read from ``root``."""
    for line in text.splitlines():
        match = SNIPPET.match(line)
        if match is None or not (root / match["path"]).is_file():
            continue
        lines: list[str] | None = (root / match["path"]).read_text(encoding="utf-8").splitlines()
        if match["section"] is not None:
            lines = section(lines or [], match["section"])
        for _, _, heading in headings(lines or []):
            yield match["path"], slug(heading)


# -- the hooks ---------------------------------------------------------------------------


@dataclass
class Project:
    """The checkout being built: where mkdocs.yml is (snippets' paths start
    there), and which page includes each heading of an included file."""

    root: Path
    to_site: dict[tuple[str, str], str] = field(default_factory=dict)


def on_config(config: Any) -> Any:
    """pymdownx.snippets becomes ``Snippets``, with the options mkdocs.yml gives it."""
    project = Project(Path(config["config_file_path"]).resolve().parent)
    options = config["mdx_configs"].pop("pymdownx.snippets", {})
    config["markdown_extensions"] = [e for e in config["markdown_extensions"] if e != "pymdownx.snippets"]
    config["markdown_extensions"].append(Snippets(project, **options))
    config["uistream_project"] = project
    return config


def on_files(files: Any, config: Any) -> Any:
    project: Project = config["uistream_project"]
    project.to_site.clear()
    for file in files.documentation_pages():
        for source, anchor in included(project.root, Path(file.abs_src_path).read_text(encoding="utf-8")):
            project.to_site.setdefault((source, anchor), file.src_uri)
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """The settings reference, from the code of this build."""
    if page.file.src_uri == SETTINGS_PAGE:
        return settings_reference()
    return markdown


def _write_settings() -> None:
    target = ROOT / "docs" / SETTINGS_PAGE
    target.write_text(settings_reference(), encoding="utf-8")
    print(f"wrote {target.relative_to(ROOT)}")


if __name__ == "__main__":
    if sys.argv[1:] != ["settings"]:
        sys.exit("usage: python docs/mkdocs_hooks.py settings   (writes docs/reference/settings.md)")
    _write_settings()
