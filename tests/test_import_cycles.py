"""No two modules of ``uistream_app`` import each other, even through a chain
and even from inside a function (docs/architecture.md, "Rooms": imports run
one way, down).

The graph is read from the source with ``ast``, not from ``sys.modules``, so a
function-level import counts as much as a module-level one: hiding a cycle in a
function defers it, it does not untie it. Only imports under
``if TYPE_CHECKING:`` are left out, since they never run.

A package's ``__init__`` counts: ``import uistream_app.live.redis_streams``
runs ``uistream_app/live/__init__.py`` first, so an import of a submodule is
also an edge to each package ``__init__`` on its path below ``uistream_app``
(the root package itself is left out: every module "imports" it, and its
``__init__`` imports nothing of ours). A name taken from a package itself
(``from .live import get_broker``, ``from . import get_broker`` where
``get_broker`` is no submodule) is an edge to its ``__init__`` too.

The one exception: a submodule import is no edge to the ``__init__`` of a
package the importing module is inside. By the time ``uistream_app.live.memory``
runs, ``uistream_app.live`` has started importing (Python imports parents
first), so ``from . import base`` in it does not run ``live/__init__`` again;
counting that edge would turn every package whose ``__init__`` re-exports its
submodules into a cycle that is only an artefact (``runs/``, ``live/`` and
``recording/`` would each be one knot). A module importing itself is no edge
either: it is in ``sys.modules`` already, and nothing runs.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

from .conftest import ROOT

PACKAGE = "uistream_app"

# Celery's autodiscovery: the worker imports ``tasks`` by name, and the task
# body needs the executor's worker half, while the executor needs the task to
# send. ``executors`` imports ``tasks`` inside ``CeleryRunner`` because Celery
# is an extra. Named exactly, so a longer cycle through either still fails.
ALLOWED_CYCLES = [
    frozenset({"uistream_app.lifecycle.executors", "uistream_app.tasks"}),
]


def module_files(root: Path = ROOT) -> dict[str, Path]:
    """Every module of the package by its dotted name (``__init__`` as the package)."""
    found: dict[str, Path] = {}
    for path in sorted((root / PACKAGE).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if "migrations" in parts:
            continue
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement, at any depth, except those under ``if TYPE_CHECKING:``."""
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            stack.extend(node.orelse)
            continue
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        stack.extend(ast.iter_child_nodes(node))


def _resolve(name: str, modules: dict[str, Path]) -> str | None:
    """The longest prefix of a dotted name that is one of our modules."""
    parts = name.split(".")
    while parts:
        candidate = ".".join(parts)
        if candidate in modules:
            return candidate
        parts.pop()
    return None


def imported_modules(module: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The modules of ours whose code runs when ``module`` imports what it does."""
    is_package = path.name == "__init__.py"
    package = module if is_package else module.rpartition(".")[0]
    targets: set[str] = set()
    for node in _imports(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            if node.level:
                base_parts = package.split(".")
                if node.level > 1:
                    base_parts = base_parts[: -(node.level - 1)]
                base = ".".join(base_parts)
                source = f"{base}.{node.module}" if node.module else base
            else:
                source = node.module or ""
            # ``from . import x`` / ``from pkg import x`` names submodule x
            # when there is one; otherwise x is an attribute of ``source``,
            # which then is used itself (its __init__ when it is a package).
            submodules = [f"{source}.{alias.name}" for alias in node.names if f"{source}.{alias.name}" in modules]
            names = submodules if len(submodules) == len(node.names) else [source, *submodules]
        for name in names:
            target = _resolve(name, modules)
            if target is None or target == module:
                continue
            targets.add(target)
            # The packages on the way run their __init__ first, except those
            # this module is inside, which are importing already (see above).
            parts = target.split(".")
            for i in range(2, len(parts)):
                parent = ".".join(parts[:i])
                if not (module + ".").startswith(parent + "."):
                    targets.add(parent)
    return targets


def import_graph(root: Path = ROOT) -> dict[str, set[str]]:
    modules = module_files(root)
    return {name: imported_modules(name, path, modules) for name, path in modules.items()}


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's components of more than one module, each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    counter = 0

    def visit(node: str) -> None:
        nonlocal counter
        index[node] = low[node] = counter
        counter += 1
        stack.append(node)
        on_stack.add(node)
        for succ in sorted(graph.get(node, ())):
            if succ not in index:
                visit(succ)
                low[node] = min(low[node], low[succ])
            elif succ in on_stack:
                low[node] = min(low[node], index[succ])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def cycle_through(start: str, component: list[str], graph: dict[str, set[str]]) -> list[str]:
    """The shortest chain from ``start`` back to it inside ``component``: a → b → … → a."""
    members = set(component)
    parents: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following: list[str] = []
        for node in frontier:
            for succ in sorted(graph[node] & members):
                if succ == start:
                    chain = [node]
                    while chain[-1] != start:
                        chain.append(parents[chain[-1]])
                    return [*reversed(chain), start]
                if succ not in parents:
                    parents[succ] = node
                    following.append(succ)
        frontier = following
    raise AssertionError(f"{component} is not strongly connected")


def describe(component: list[str], graph: dict[str, set[str]]) -> str:
    """Chains through every module of the component, one a line."""
    chains: list[list[str]] = []
    covered: set[str] = set()
    for start in component:
        if start not in covered:
            chain = cycle_through(start, component, graph)
            chains.append(chain)
            covered.update(chain)
    return "\n  ".join(" -> ".join(m.removeprefix(PACKAGE + ".") for m in chain) for chain in chains)


def test_the_checker_sees_function_level_and_package_imports() -> None:
    graph = import_graph()
    # ``apps.ready`` imports ``checks`` inside a method (app loading order).
    assert "uistream_app.checks" in graph["uistream_app.apps"]
    # A submodule import runs the package's __init__ too.
    assert {"uistream_app.live", "uistream_app.live.base"} <= set().union(*graph.values())
    assert len(graph) > 40


def test_no_import_cycles() -> None:
    graph = import_graph()
    cycles = [c for c in strongly_connected(graph) if frozenset(c) not in ALLOWED_CYCLES]
    listed = "\n".join("  " + describe(c, graph) for c in cycles)
    assert not cycles, f"import cycles between modules of uistream_app (move the shared piece below both):\n{listed}"


def test_the_allowed_cycles_are_still_there() -> None:
    # When one is untied, take it off the list so it can't come back unnoticed.
    components = {frozenset(c) for c in strongly_connected(import_graph())}
    assert set(ALLOWED_CYCLES) <= components


def test_the_checker_finds_hidden_cycles(tmp_path: Path) -> None:
    # A tree of its own: a cycle behind a function-level import, one through
    # a package's __init__, and imports that must not count.
    files = {
        "__init__.py": "",
        "low.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .high import High\n",
        "high.py": "from . import low\n",
        "a.py": "from .b import thing\n",
        "b.py": "def thing():\n    from uistream_app import a\n",
        "pkg/__init__.py": "from .inner import x\n",
        "pkg/inner.py": "from . import sibling\n",
        "pkg/sibling.py": "import uistream_app.user\n",
        "user.py": "from uistream_app.pkg import sibling\n",
        "tasks.py": "from .executors import run\n",
        "executors.py": "def start():\n    from .tasks import task\n\ndef run():\n    from . import runner\n",
        "runner.py": "from .tasks import task\n",
    }
    for name, text in files.items():
        path = tmp_path / PACKAGE / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    graph = import_graph(tmp_path)
    # TYPE_CHECKING is left out; ``from . import x`` inside a package is x, not the __init__.
    assert graph[f"{PACKAGE}.low"] == set()
    assert graph[f"{PACKAGE}.pkg.inner"] == {f"{PACKAGE}.pkg.sibling"}
    found = {frozenset(c) for c in strongly_connected(graph)}
    assert found == {
        frozenset({f"{PACKAGE}.a", f"{PACKAGE}.b"}),
        # user imports pkg.sibling, which runs pkg/__init__ first.
        frozenset({f"{PACKAGE}.pkg", f"{PACKAGE}.pkg.inner", f"{PACKAGE}.pkg.sibling", f"{PACKAGE}.user"}),
        # A longer cycle through tasks is not the allowed pair.
        frozenset({f"{PACKAGE}.executors", f"{PACKAGE}.runner", f"{PACKAGE}.tasks"}),
    }
    assert not found & set(ALLOWED_CYCLES)
