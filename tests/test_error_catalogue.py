"""The error catalogue (``uistream_app.errors``): the docs' table of codes
and ``CATALOGUE`` agree both ways, every refusal class answers a code of the
catalogue with that code's status, no module of ``uistream_app`` writes a
code as a string literal, and a project's hooks may raise the classes (and
``BadRequest`` as the first release had it)."""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Iterator
from typing import Any

import pytest
from django.test import AsyncClient, override_settings
from django.urls import path

from uistream_app import errors
from uistream_app.errors import CATALOGUE, BadRequest, Codes, Conflict, NotFound, Throttled, from_status
from uistream_app.views import ChatView

from .conftest import ROOT

PACKAGE = ROOT / "uistream_app"
DOCS_TABLE = ROOT / "docs" / "architecture.md"

#: The refusal classes: every subclass of ``BadRequest`` that ``errors`` exports.
CLASSES = {
    name: obj
    for name, obj in vars(errors).items()
    if isinstance(obj, type) and issubclass(obj, BadRequest) and name in errors.__all__
}
_ROW = re.compile(r"^\| `(?P<code>[a-z_]+)` \| (?P<status>\d{3}|—) \| (?P<when>.+) \|$")


def docs_table() -> dict[str, tuple[int | None, str]]:
    """The rows of docs/architecture.md's "Error codes" table."""
    text = DOCS_TABLE.read_text(encoding="utf-8")
    section = text.split("### Error codes", 1)[1].split("\n## ", 1)[0]
    rows: dict[str, tuple[int | None, str]] = {}
    for line in section.splitlines():
        match = _ROW.match(line)
        if match is None:
            continue
        assert match["code"] not in rows, f"{match['code']} is twice in the table"
        status = None if match["status"] == "—" else int(match["status"])
        rows[match["code"]] = (status, match["when"])
    return rows


def defined_codes() -> dict[str, str]:
    """``Codes``' constants: name → code."""
    return {name: value for name, value in vars(Codes).items() if name.isupper()}


# -- the catalogue and its table --------------------------------------------------------


def test_every_constant_is_in_the_catalogue_once() -> None:
    codes = defined_codes()
    assert len(set(codes.values())) == len(codes), "two constants of Codes share a code"
    assert set(codes.values()) == set(CATALOGUE)


def test_the_docs_table_is_the_catalogue() -> None:
    table = docs_table()
    assert table, "no rows found under '### Error codes' in docs/architecture.md"
    expected = {code: (info.status, info.when) for code, info in CATALOGUE.items()}
    undocumented = sorted(set(expected) - set(table))
    undefined = sorted(set(table) - set(expected))
    assert not undocumented, f"codes missing from the docs' table: {undocumented}"
    assert not undefined, f"codes in the docs' table that errors.Codes does not define: {undefined}"
    wrong = {code: (table[code], expected[code]) for code in expected if table[code] != expected[code]}
    assert not wrong, f"rows that differ (docs, catalogue): {wrong}"


@pytest.mark.parametrize("name", sorted(CLASSES))
def test_each_class_defaults_to_a_code_of_its_status(name: str) -> None:
    cls = CLASSES[name]
    assert cls.default_code in CATALOGUE, f"{name}.default_code {cls.default_code!r} is not in the catalogue"
    assert CATALOGUE[cls.default_code].status == cls.status_code
    refusal = cls()
    assert refusal.status == cls.status_code
    assert refusal.as_dict() == {"error": {"code": cls.default_code, "message": cls.default_detail}}


# -- the raise sites ----------------------------------------------------------------------


def modules() -> Iterator[tuple[str, ast.Module]]:
    for file in sorted(PACKAGE.rglob("*.py")):
        if "migrations" in file.parts:
            continue
        yield str(file.relative_to(ROOT)), ast.parse(file.read_text(encoding="utf-8"), str(file))


def _module_name(file: str) -> str:
    return file.removesuffix(".py").removesuffix("/__init__").replace("/", ".")


def imported_refusals(file: str, tree: ast.Module) -> dict[str, type[BadRequest]]:
    """The local names under which ``file`` imports a class of ``uistream_app.errors``
    (not ``runs.failures``, not DRF's)."""
    package = _module_name(file).split(".")
    if not file.endswith("__init__.py"):
        package = package[:-1]
    names: dict[str, type[BadRequest]] = {}
    for node in ast.walk(tree):
        if not isinstance(node, ast.ImportFrom) or node.module is None:
            continue
        base = package[: len(package) - node.level + 1] if node.level else []
        if ".".join([*base, node.module]) != "uistream_app.errors":
            continue
        for alias in node.names:
            if alias.name in CLASSES:
                names[alias.asname or alias.name] = CLASSES[alias.name]
    return names


def literal_codes(tree: ast.Module) -> Iterator[tuple[int, str]]:
    """Codes written as string literals: ``code="…"`` (or ``error_code=``),
    an ``error`` frame's code (``renderer.error(text, "…")``), a code
    compared with a literal (``exc.code == "…"``)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            for keyword in node.keywords:
                if keyword.arg in ("code", "error_code") and _is_str(keyword.value):
                    yield node.lineno, f"{keyword.arg}={ast.unparse(keyword.value)}"
            func = node.func
            frame = isinstance(func, ast.Attribute) and func.attr == "error" and len(node.args) >= 2
            if frame and _is_str(node.args[1]):
                yield node.lineno, f"error frame code {ast.unparse(node.args[1])}"
        elif isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if any(isinstance(s, ast.Attribute) and s.attr == "code" for s in sides) and any(map(_is_str, sides)):
                yield node.lineno, ast.unparse(node)
        elif isinstance(node, ast.arguments):
            # A default of a ``code`` parameter (``code: str = "invalid"``).
            positional = [*node.posonlyargs, *node.args]
            pairs = list(zip(positional[len(positional) - len(node.defaults) :], node.defaults, strict=True))
            pairs += [(a, d) for a, d in zip(node.kwonlyargs, node.kw_defaults, strict=True) if d is not None]
            for arg, default in pairs:
                if arg.arg == "code" and _is_str(default):
                    yield default.lineno, f"{arg.arg}={ast.unparse(default)} (a default)"


def _is_str(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str)


def test_the_scan_finds_what_it_forbids() -> None:
    # The scan below passes on an empty result: it must find each shape.
    tree = ast.parse(
        'raise BadRequest("x", code="a")\n'
        'run.fail(error_code="b")\n'
        'send(renderer.error(text, "c"))\n'
        'same = exc.code == "d"\n'
        'def f(message, *, code="e"): ...\n'
        "raise BadRequest('x', code=Codes.INVALID)\n"
    )
    assert sorted(line for line, _ in literal_codes(tree)) == [1, 2, 3, 4, 5]


def test_no_module_writes_a_code_as_a_literal() -> None:
    found = [f"{file}:{line}: {what}" for file, tree in modules() for line, what in literal_codes(tree)]
    assert not found, "codes written as literals (use errors.Codes):\n" + "\n".join(found)


def test_raise_sites_answer_their_code_with_its_status() -> None:
    """A class of ``errors`` is raised without ``status=`` (the class is the
    status), and a ``Codes`` code it is given is one of that status."""
    problems: list[str] = []
    checked = 0
    for file, tree in modules():
        if file == "uistream_app/errors.py":
            continue
        local = imported_refusals(file, tree)
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in local):
                continue
            cls = local[node.func.id]
            keywords = {k.arg: k.value for k in node.keywords}
            if "status" in keywords:
                problems.append(f"{file}:{node.lineno}: {cls.__name__}(status=...): raise the class of that status")
            code = keywords.get("code")
            if isinstance(code, ast.Attribute) and isinstance(code.value, ast.Name) and code.value.id == "Codes":
                checked += 1
                status = CATALOGUE[getattr(Codes, code.attr)].status
                if status != cls.status_code:
                    problems.append(
                        f"{file}:{node.lineno}: {cls.__name__} ({cls.status_code}) with Codes.{code.attr} ({status})"
                    )
    assert checked >= 20, checked  # the scan saw the raise sites
    assert not problems, "\n".join(problems)


# -- raising them -------------------------------------------------------------------------


def test_bad_request_the_first_release_way() -> None:
    refusal = BadRequest(
        "over the plan", code="plan_exceeded", field="plan", status=402, headers={"X-Plan": "free"}, details={"n": 3}
    )
    assert (refusal.status, refusal.headers, str(refusal)) == (402, {"X-Plan": "free"}, "over the plan")
    error = {"code": "plan_exceeded", "message": "over the plan", "field": "plan", "n": 3}
    assert refusal.as_dict() == {"error": error}
    assert BadRequest("no").as_dict() == {"error": {"code": "invalid", "message": "no"}}


def test_every_class_is_a_bad_request() -> None:
    # ``except BadRequest`` (the pipeline's, the consumer's, a project's) catches every refusal.
    with pytest.raises(BadRequest) as caught:
        raise NotFound()
    assert (caught.value.status, caught.value.code, caught.value.message) == (404, "not_found", errors.NOT_FOUND_TEXT)


@pytest.mark.parametrize(
    ("status", "cls"), [(400, BadRequest), (404, NotFound), (409, Conflict), (429, Throttled), (418, BadRequest)]
)
def test_from_status_builds_the_class_of_the_status(status: int, cls: type[BadRequest]) -> None:
    refusal = from_status("m", status=status, code="c", field="f")
    assert type(refusal) is cls
    assert (refusal.status, refusal.as_dict()) == (status, {"error": {"code": "c", "message": "m", "field": "f"}})


class _ArchivedChatView(ChatView):
    """A project's hook refusing with one of the classes and a code of its own."""

    def get_model(self, context: Any) -> Any:
        raise Conflict("this chat is archived", code="archived", field="id")


class _PlanChatView(ChatView):
    """A project's hook refusing as the first release had it."""

    def get_model(self, context: Any) -> Any:
        raise BadRequest("upgrade your plan", code="plan_exceeded", status=402, headers={"X-Plan": "free"})


urlpatterns = [path("archived/chat", _ArchivedChatView.as_view()), path("plan/chat", _PlanChatView.as_view())]


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    ("url", "status", "error", "headers"),
    [
        ("/archived/chat", 409, {"code": "archived", "message": "this chat is archived", "field": "id"}, {}),
        ("/plan/chat", 402, {"code": "plan_exceeded", "message": "upgrade your plan"}, {"X-Plan": "free"}),
    ],
)
async def test_a_hook_refuses_with_the_house_answer(
    url: str, status: int, error: dict[str, Any], headers: dict[str, str]
) -> None:
    body = {"id": "c1", "messages": [{"id": "u1", "role": "user", "parts": [{"type": "text", "text": "hi"}]}]}
    with override_settings(ROOT_URLCONF="tests.test_error_catalogue", UISTREAM={"ALLOW_ANONYMOUS": True}):
        response = await AsyncClient().post(url, json.dumps(body), content_type="application/json")
    assert response.status_code == status
    assert json.loads(response.content) == {"error": error}
    for name, value in headers.items():
        assert response[name] == value
