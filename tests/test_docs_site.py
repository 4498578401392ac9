"""The documentation site (mkdocs.yml, docs/mkdocs_hooks.py) builds with
``mkdocs build --strict``: every link, anchor and reference resolves, and a
broken one fails the build. Its pages come from their one source: the
README's getting-started section, the docs' own headings (GitHub's anchors),
the code's docstrings, ``uistream_app.conf``'s settings table, the checks'
table and the error codes.

What docs/*.md and the code's comments cite is checked, without a build, by
test_docs_references.py; this module reuses its reading of headings.
"""

from __future__ import annotations

import html
import importlib.util
import inspect
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

from uistream_app import checks, errors
from uistream_app.conf import DEFAULTS, DESCRIPTIONS
from uistream_app.hooks import ChatHooks

from .conftest import ROOT
from .test_docs_references import headings, slug

START = "<!-- --8<-- [start:getting-started] -->"
END = "<!-- --8<-- [end:getting-started] -->"
#: The README's set-up recipe (getting-started) and what follows it in the
#: same section (using), both on the Getting started page.
USING_START = "<!-- --8<-- [start:using] -->"
USING_END = "<!-- --8<-- [end:using] -->"


def load_hooks() -> ModuleType:
    spec = importlib.util.spec_from_file_location("mkdocs_hooks", ROOT / "docs" / "mkdocs_hooks.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(spec.name, module)  # its dataclass looks its module up
    spec.loader.exec_module(sys.modules[spec.name])
    return sys.modules[spec.name]


def build(config: Path, site: Path) -> subprocess.CompletedProcess[str]:
    """``mkdocs build --strict`` (not ``--quiet``: it silences the warnings,
    and strict mode then has none to count)."""
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}  # Material's banner about its successor
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(config), "-d", str(site)],
        cwd=config.parent,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def article(site: Path, page: str) -> str:
    """The content of a built page (``page`` as mkdocs names its directory)."""
    text = (site / page / "index.html").read_text(encoding="utf-8")
    return text[text.index("<article") : text.index("</article>")]


def ids(content: str) -> set[str]:
    return set(re.findall(r'\sid="([^"]+)"', content))


def words(content: str) -> str:
    """A page's text, tags dropped and whitespace collapsed."""
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", content)).split())


def test_the_site_builds_strict_from_its_sources(tmp_path: Path) -> None:
    site = tmp_path / "site"
    result = build(ROOT / "mkdocs.yml", site)
    assert result.returncode == 0, result.stdout + result.stderr
    assert not [line for line in result.stderr.splitlines() if line.startswith("WARNING")]

    # Getting started is the README's section, all of it and no more, its
    # links from the repository's root made links of the site.
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split(START, 1)[1].split(END, 1)[0] + readme.split(USING_START, 1)[1].split(USING_END, 1)[0]
    after = readme.split(USING_END, 1)[1]
    (tmp_path / "section.md").write_text(section, encoding="utf-8")
    (tmp_path / "after.md").write_text(after, encoding="utf-8")
    page = article(site, "getting-started")
    assert {slug(h) for h in headings(tmp_path / "section.md")} <= ids(page)
    assert slug(headings(tmp_path / "after.md")[0]) not in ids(page)
    for target, anchor in re.findall(r"\]\(docs/([\w-]+)\.md(?:#([\w-]+))?\)", section):
        assert f'href="../{target}/{"#" + anchor if anchor else ""}"' in page
    assert 'href="../upgrade-notes/#upgrade-notes"' in page  # the README's own "#upgrade-notes"

    # The guides' anchors are GitHub's, so a link that works there works here.
    for guide in ("architecture", "protocols", "operations", "recording", "adapters", "agents", "benchmarks"):
        expected = {slug(h) for h in headings(ROOT / "docs" / f"{guide}.md")}
        assert expected <= ids(article(site, guide)), guide

    # The reference, from the code.
    hooks = article(site, "reference/hooks")
    for name in ("ChatHooks", "ChatHooks.get_model", "ChatHooks.start_turn", "TurnContext", "TurnSetup"):
        assert f"uistream_app.hooks.{name}" in ids(hooks)
    first_sentence = " ".join((inspect.getdoc(ChatHooks.get_model) or "?").split()).split(". ")[0]
    assert first_sentence in words(hooks), first_sentence
    assert {"uistream_app.views.ChatView", "uistream_app.views.AGUIView"} <= ids(article(site, "reference/views"))
    assert "uistream_app.consumers.ChatConsumer" in ids(article(site, "reference/consumer"))
    testing = ids(article(site, "reference/testing"))
    for name in ("ChatClient", "SocketChatClient", "AGUIClient", "TurnResult", "ScriptedModel"):
        assert f"uistream_app.testing.{name}" in testing
    settings_page = article(site, "reference/settings")
    for key, default in DEFAULTS.items():
        assert f"<td><code>{key}</code></td>" in settings_page
        if isinstance(default, int | bool) or default is None:
            assert f"<td><code>{default!r}</code></td>" in settings_page
    checks_page = article(site, "reference/checks")
    for check_id in re.findall(r"^\| ([EW]\d{3}) ", checks.__doc__ or "", re.MULTILINE):
        assert f"<td>{check_id}</td>" in checks_page
    errors_page = article(site, "reference/errors")
    for code in errors.CATALOGUE:
        assert f"<td><code>{code}</code></td>" in errors_page


def test_a_broken_link_fails_the_build(tmp_path: Path) -> None:
    """A copy of the site without the pages mkdocstrings renders (quicker to
    build), with three broken links: in the README's section, to a heading
    of docs/ that is not there and to a README heading no page includes; in
    a page of docs/, to another's missing heading. The build fails on each,
    and on nothing else."""
    rendered = ("hooks.md", "views.md", "consumer.md", "testing.md", "checks.md")
    shutil.copytree(ROOT / "docs", tmp_path / "docs", ignore=shutil.ignore_patterns("*.py", "index.md", *rendered))
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    broken = (
        "See [nowhere](docs/architecture.md#no-such-heading) and [the last section](#a-section-no-page-includes).\n"
    )
    readme = readme.replace(END, broken + END) + "\n## A section no page includes\n"
    (tmp_path / "README.md").write_text(readme, encoding="utf-8")
    with (tmp_path / "docs" / "operations.md").open("a", encoding="utf-8") as operations:
        operations.write("\nSee [nowhere](protocols.md#no-such-rule).\n")
    guides = ["getting-started.md", "upgrade-notes.md", "architecture.md", "protocols.md", "operations.md"]
    guides += ["recording.md", "adapters.md", "agents.md", "benchmarks.md", "reference/settings.md"]
    guides += ["reference/errors.md"]
    config = [
        f"INHERIT: {ROOT / 'mkdocs.yml'}",
        f"hooks: [{ROOT / 'docs' / 'mkdocs_hooks.py'}]",
        "watch: []",
        f"nav: [{', '.join(guides)}]",
    ]
    (tmp_path / "mkdocs.yml").write_text("\n".join(config) + "\n", encoding="utf-8")

    result = build(tmp_path / "mkdocs.yml", tmp_path / "site")

    assert result.returncode != 0
    warnings = sorted(line for line in result.stderr.splitlines() if line.startswith("WARNING"))
    assert warnings == [
        "WARNING -  Doc file 'getting-started.md' contains a link '#a-section-no-page-includes', but there is no "
        "such anchor on this page.",
        "WARNING -  Doc file 'getting-started.md' contains a link '/architecture.md#no-such-heading', but the doc "
        "'architecture.md' does not contain an anchor '#no-such-heading'.",
        "WARNING -  Doc file 'operations.md' contains a link 'protocols.md#no-such-rule', but the doc "
        "'protocols.md' does not contain an anchor '#no-such-rule'.",
    ], result.stderr


def test_every_setting_is_described() -> None:
    assert list(DESCRIPTIONS) == list(DEFAULTS), "DESCRIPTIONS lists the keys of DEFAULTS, in their order"
    for key, text in DESCRIPTIONS.items():
        assert text.strip(), key
        assert "\n" not in text, f"{key}: one line of Markdown (a table cell)"


def test_the_settings_reference_is_the_code() -> None:
    hooks = load_hooks()
    page = ROOT / "docs" / "reference" / "settings.md"
    assert page.read_text(encoding="utf-8") == hooks.settings_reference(), (
        "docs/reference/settings.md is not what uistream_app/conf.py says: run `python docs/mkdocs_hooks.py settings`"
    )
