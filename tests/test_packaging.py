"""django-uistream as it ships: the sdist and the wheel that
``python -m build`` makes of this checkout (tests/packaging.py builds them,
the wheel from the sdist).

What a project installs is the wheel, so it is compared with the tree: every
file of ``uistream_app/`` (modules, migrations, templates, static files,
``py.typed``) is in it and nothing else is, so a new template cannot be left
behind by a package-data glob, nor tests, the demo or the benchmarks ride
along. Its metadata names the extras the package and its docs tell users to
install, and classifiers PyPI accepts that say which Django and Python
versions CI runs the suite on. The sdist rebuilds (the wheel was built from
it) and holds what a reader of it looks for.
"""

from __future__ import annotations

import email.parser
import re
import subprocess
import sys
import tarfile
import zipfile
from email.message import Message
from pathlib import Path

import trove_classifiers

from .packaging import ROOT, checkout_files

#: The extras a project can ask for; adding or dropping one is a change its
#: users notice, so it is written out here rather than read from pyproject.toml.
EXTRAS = {
    "asgi",
    "channels",
    "redis",
    "postgres",
    "celery",
    "tasks",
    "pydantic-ai",
    "langgraph",
    "openai-agents",
    "mcp",
    "otel",
}
#: ``django-uistream[extra]`` as the package's messages and the docs write it.
EXTRA_MENTION = re.compile(r"django-uistream\[([a-z0-9-]+)\]")
#: Whatever the wheel holds beside the package must be its metadata.
DIST_INFO = re.compile(r"^django_uistream-[^/]+\.dist-info/")


def wheel_metadata(wheel: Path) -> Message:
    with zipfile.ZipFile(wheel) as archive:
        (name,) = [n for n in archive.namelist() if re.fullmatch(r"[^/]+\.dist-info/METADATA", n)]
        return email.parser.BytesParser().parsebytes(archive.read(name))


def package_files_of_the_tree() -> set[str]:
    files = {name for name in checkout_files() if name.startswith("uistream_app/")}
    # Guards against a listing that went wrong, which would make the
    # comparison below vacuous.
    for part in ("uistream_app/migrations/", "uistream_app/templates/", "uistream_app/static/"):
        assert any(name.startswith(part) for name in files), f"no file under {part} in the tree"
    return files


def run(*command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *command], capture_output=True, text=True, cwd=ROOT)


def test_twine_and_check_wheel_contents_accept_both(dists: tuple[Path, Path]) -> None:
    wheel, sdist = dists
    twine = run("twine", "check", "--strict", str(wheel), str(sdist))
    assert twine.returncode == 0, twine.stdout + twine.stderr
    # Its configuration is pyproject.toml's [tool.check-wheel-contents].
    contents = run("check_wheel_contents", "--config", str(ROOT / "pyproject.toml"), str(wheel))
    assert contents.returncode == 0, contents.stdout + contents.stderr


def test_the_wheel_holds_the_package_tree_and_nothing_else(dists: tuple[Path, Path]) -> None:
    wheel, _ = dists
    with zipfile.ZipFile(wheel) as archive:
        names = {name for name in archive.namelist() if not name.endswith("/")}
    shipped = {name for name in names if not DIST_INFO.match(name)}
    tree = package_files_of_the_tree()

    assert sorted(tree - shipped) == [], "files of uistream_app/ missing from the wheel"
    assert sorted(shipped - tree) == [], "files in the wheel that are not in uistream_app/"
    assert "uistream_app/py.typed" in shipped
    assert not [n for n in names if n.startswith(("tests/", "demo_project/", "bench/", "frontend/"))]
    assert not [n for n in names if "__pycache__" in n or n.endswith((".pyc", ".pyo"))]
    # pyproject.toml lets check-wheel-contents pass modules at paths
    # `import` cannot spell for Django's migrations only.
    unimportable = [
        name
        for name in shipped
        if name.endswith(".py")
        and not name.startswith("uistream_app/migrations/")
        and not all(part.isidentifier() for part in name.removesuffix(".py").split("/"))
    ]
    assert unimportable == []
    assert [n for n in names if DIST_INFO.match(n) and n.endswith("/licenses/LICENSE")]


def test_the_metadata_names_the_extras_the_docs_tell_users_to_install(dists: tuple[Path, Path]) -> None:
    metadata = wheel_metadata(dists[0])
    extras = set(metadata.get_all("Provides-Extra") or [])
    assert extras == EXTRAS

    sources = [*ROOT.glob("uistream_app/**/*.py"), ROOT / "README.md", *ROOT.glob("docs/*.md")]
    mentioned = {extra for path in sources for extra in EXTRA_MENTION.findall(path.read_text(encoding="utf-8"))}
    assert {"celery", "mcp", "otel", "redis", "tasks"} <= mentioned  # the messages of the code that needs them
    assert sorted(mentioned - extras) == [], "extras named in the package or its docs that do not exist"

    assert metadata["License-Expression"] == "BSD-3-Clause"
    assert metadata.get_all("License-File") == ["LICENSE"]
    assert metadata["Description-Content-Type"] == "text/markdown"


def ci_django_versions() -> set[str]:
    """The Django versions CI runs the suite on: requirements.txt's pin (the
    main leg) and the range .ci/run installs for the LTS leg."""
    pin = re.search(r"^Django==(\d+\.\d+)\.", (ROOT / "requirements.txt").read_text(), re.MULTILINE)
    lts = re.search(r"'Django>=(\d+\.\d+),<", (ROOT / ".ci" / "run").read_text())
    assert pin, "requirements.txt pins Django"
    assert lts, ".ci/run installs a range of Django for the LTS leg"
    return {pin[1], lts[1]}


def ci_python_versions() -> set[str]:
    """The Pythons CI runs the suite on: the first one scripts/setup looks
    for (the main leg's virtualenv) and the one .ci/run looks for (the LTS
    leg)."""
    found = set()
    for script in ("scripts/setup", ".ci/run"):
        first = re.search(r"for candidate in python(3\.\d+)\b", (ROOT / script).read_text())
        assert first, f"{script} looks for a python3.X"
        found.add(first[1])
    return found


def versions(classifiers: list[str], prefix: str) -> set[str]:
    """The ``X.Y`` of the ``<prefix> :: X.Y`` classifiers."""
    return {c.removeprefix(f"{prefix} :: ") for c in classifiers if re.fullmatch(rf"{prefix} :: \d+\.\d+", c)}


def test_the_classifiers_are_pypis_and_say_what_ci_runs(dists: tuple[Path, Path]) -> None:
    metadata = wheel_metadata(dists[0])
    classifiers = metadata.get_all("Classifier") or []
    assert sorted(set(classifiers) - trove_classifiers.classifiers) == [], "not classifiers PyPI accepts"

    assert versions(classifiers, "Framework :: Django") == ci_django_versions()
    pythons = versions(classifiers, "Programming Language :: Python")
    assert pythons == ci_python_versions()
    assert metadata["Requires-Python"] == f">={min(pythons, key=lambda v: tuple(map(int, v.split('.'))))}"
    assert "Framework :: Django" in classifiers
    assert "Typing :: Typed" in classifiers
    # PEP 639: with a license expression, a License :: classifier is an error on upload.
    assert not [c for c in classifiers if c.startswith("License ::")]


def test_the_sdist_holds_what_a_rebuild_and_a_reader_need(dists: tuple[Path, Path]) -> None:
    wheel, sdist = dists
    with tarfile.open(sdist) as archive:
        names = {member.name.split("/", 1)[1] for member in archive.getmembers() if member.isfile()}
    for name in ("pyproject.toml", "PKG-INFO", "README.md", "CHANGELOG.md", "LICENSE"):
        assert name in names
    assert sorted(package_files_of_the_tree() - names) == [], "files of uistream_app/ missing from the sdist"
    assert not [n for n in names if n.startswith(("tests/", "demo_project/", "bench/", "frontend/", "docs/"))]
    assert not [n for n in names if "__pycache__" in n or n.endswith((".pyc", ".pyo"))]
    # build_dist built the wheel from this sdist, so it rebuilds; and into
    # the same package, file for file.
    with zipfile.ZipFile(wheel) as built:
        from_sdist = {n for n in built.namelist() if n.startswith("uistream_app/")}
    assert from_sdist == {n for n in names if n.startswith("uistream_app/")}
