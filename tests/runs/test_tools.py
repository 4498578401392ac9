"""``Tool`` / ``@tool``: schemas from hints and docstrings, validation, calls."""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable
from typing import Annotated, Any, Literal, Optional, TypedDict

import pytest

from uistream_app.runs import Tool, ToolArgumentsError, ToolContext, ToolSpec, tool
from uistream_app.runs.tools import tool_output_text, validate_json


class Unit(enum.Enum):
    C = "celsius"
    F = "fahrenheit"


@dataclasses.dataclass
class Window:
    start: str
    days: int = 1


@dataclasses.dataclass
class Node:
    child: Node | None


class Filters(TypedDict):
    lang: str
    tags: list[str]


def forecast(
    city: str,
    unit: Unit = Unit.C,
    window: Window | None = None,
    detail: Literal["short", "long"] = "short",
    limit: Annotated[int, "At most this many rows."] = 5,
    ratio: float = 0.5,
    flags: dict[str, bool] | None = None,
    filters: Filters | None = None,
    coords: tuple[float, float] | None = None,
) -> dict[str, Any]:
    """Forecast the weather.

    Looks far ahead.

    Args:
        city: The city's name,
            as people write it.
        unit: Temperature unit.
    """
    return {
        "city": city,
        "unit": unit,
        "window": window,
        "detail": detail,
        "limit": limit,
        "ratio": ratio,
        "flags": flags,
        "filters": filters,
        "coords": coords,
    }


def test_schema_and_descriptions_come_from_hints_and_docstring() -> None:
    t = Tool(forecast)
    assert t.name == "forecast"
    assert t.description == "Forecast the weather."
    assert t.parameters == {
        "type": "object",
        "properties": {
            "city": {"type": "string", "description": "The city's name, as people write it."},
            "unit": {"enum": ["celsius", "fahrenheit"], "description": "Temperature unit."},
            "window": {
                "anyOf": [
                    {
                        "type": "object",
                        "properties": {"start": {"type": "string"}, "days": {"type": "integer"}},
                        "required": ["start"],
                        "additionalProperties": False,
                    },
                    {"type": "null"},
                ],
                "default": None,
            },
            "detail": {"type": "string", "enum": ["short", "long"], "default": "short"},
            "limit": {"type": "integer", "description": "At most this many rows.", "default": 5},
            "ratio": {"type": "number", "default": 0.5},
            "flags": {
                "anyOf": [{"type": "object", "additionalProperties": {"type": "boolean"}}, {"type": "null"}],
                "default": None,
            },
            "filters": {
                "anyOf": [
                    {
                        "type": "object",
                        "properties": {
                            "lang": {"type": "string"},
                            "tags": {"type": "array", "items": {"type": "string"}},
                        },
                        "required": ["lang", "tags"],
                        "additionalProperties": False,
                    },
                    {"type": "null"},
                ],
                "default": None,
            },
            "coords": {
                "anyOf": [
                    {
                        "type": "array",
                        "prefixItems": [{"type": "number"}, {"type": "number"}],
                        "minItems": 2,
                        "maxItems": 2,
                    },
                    {"type": "null"},
                ],
                "default": None,
            },
        },
        "required": ["city"],
        "additionalProperties": False,
    }
    assert t.spec == ToolSpec("forecast", "Forecast the weather.", t.parameters)


def test_optional_simple_types_merge_into_a_type_list_and_sphinx_docstrings_work() -> None:
    def f(a: Optional[str], b: int | None = None) -> None:  # noqa: UP045 - both spellings on purpose
        """Do f.

        :param a: The a.
        :param int b: The b.
        """

    t = Tool(f)
    assert t.description == "Do f."
    assert t.parameters["properties"] == {
        "a": {"type": ["string", "null"], "description": "The a."},
        "b": {"type": ["integer", "null"], "description": "The b.", "default": None},
    }
    assert t.parameters["required"] == ["a"]


@pytest.mark.asyncio
async def test_arguments_are_validated_and_converted() -> None:
    t = Tool(forecast)
    args = t.parse_arguments(
        '{"city": "Oslo", "unit": "fahrenheit", "window": {"start": "mon", "days": 3}, "coords": [1, 2.5],'
        ' "filters": {"lang": "no", "tags": ["x"]}, "limit": 2.0}'
    )
    result = await t.invoke(args)
    assert result["unit"] is Unit.F
    assert result["window"] == Window("mon", 3)
    assert result["coords"] == (1, 2.5)
    assert result["filters"] == {"lang": "no", "tags": ["x"]}
    assert result["ratio"] == 0.5


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{", "Invalid JSON in arguments of forecast: unexpected end of data"),
        ("[1]", "Arguments of forecast must be a JSON object, got array"),
        ("{}", "Invalid arguments for forecast: `city` is required"),
        ('{"city": 1}', "Invalid arguments for forecast: `city`: expected string, got integer"),
        (
            '{"city": "x", "unit": "kelvin"}',
            'Invalid arguments for forecast: `unit`: must be one of ["celsius", "fahrenheit"]',
        ),
        ('{"city": "x", "limit": true}', "Invalid arguments for forecast: `limit`: expected integer, got boolean"),
        ('{"city": "x", "limit": 1.5}', "Invalid arguments for forecast: `limit`: expected integer, got number"),
        (
            '{"city": "x", "window": {"days": 2}}',
            "Invalid arguments for forecast: `window`: fits none of the allowed shapes (`window.start` is required)",
        ),
        (
            '{"city": "x", "filters": {"lang": "en", "tags": [1]}}',
            "Invalid arguments for forecast: `filters`: fits none of the allowed shapes"
            " (`filters.tags[0]`: expected string, got integer)",
        ),
        (
            '{"city": "x", "coords": [1]}',
            "Invalid arguments for forecast: `coords`: fits none of the allowed shapes"
            " (`coords`: must have at least 2 items)",
        ),
        ('{"city": "x", "town": "y"}', "Invalid arguments for forecast: `town` is not a known parameter"),
    ],
)
def test_arguments_that_do_not_fit_name_the_problem(text: str, message: str) -> None:
    with pytest.raises(ToolArgumentsError) as info:
        Tool(forecast).parse_arguments(text)
    assert str(info.value).startswith(message)


def test_an_empty_argument_text_is_an_empty_object() -> None:
    def ping() -> str:
        """Ping."""
        return "pong"

    assert Tool(ping).parse_arguments("") == {}
    assert Tool(ping).parse_arguments("  ") == {}


def test_explicit_parameters_replace_the_derived_schema() -> None:
    schema = {"type": "object", "properties": {"q": {"type": "string", "minLength": 2}}, "required": ["q"]}
    t = Tool(lambda **kw: kw, name="search", description="Search.", parameters=schema)
    assert t.spec == ToolSpec("search", "Search.", schema)
    assert t.parse_arguments('{"q": "ab", "extra": 1}') == {"q": "ab", "extra": 1}
    with pytest.raises(ToolArgumentsError, match="at least 2 characters"):
        t.parse_arguments('{"q": "a"}')


@pytest.mark.asyncio
async def test_the_decorator_forms_and_direct_calls() -> None:
    @tool
    def plain(x: int) -> int:
        """Double."""
        return x * 2

    @tool(name="renamed", description="Custom.", timeout=3, requires_approval=True)
    async def fancy(x: int, context: ToolContext) -> str:
        return f"{x} via {context.tool_call_id}"

    assert isinstance(plain, Tool)
    assert plain(4) == 8
    assert plain.__doc__ == "Double."
    assert (fancy.name, fancy.description, fancy.timeout, fancy.requires_approval) == ("renamed", "Custom.", 3, True)
    assert fancy.is_async
    assert not plain.is_async
    assert list(fancy.parameters["properties"]) == ["x"]
    ctx = ToolContext("c9", "renamed", {"x": 1})
    assert await fancy.invoke({"x": 1}, ctx) == "1 via c9"
    assert await plain.invoke({"x": 5}) == 10


def test_functions_without_a_schema_are_refused_at_decoration_time() -> None:
    def star(*args: int) -> None: ...

    def kw(**kwargs: int) -> None: ...

    def obscure(x: complex) -> None: ...

    def keys(x: dict[int, str]) -> None: ...

    def recursive(node: Node) -> None: ...

    cases: list[tuple[Callable[..., Any], str]] = [
        (star, "have no JSON Schema"),
        (kw, "have no JSON Schema"),
        (obscure, "no JSON Schema for annotation"),
        (keys, "keys must be str"),
        (recursive, "recursive type"),
    ]
    for fn, message in cases:
        with pytest.raises(TypeError, match=message):
            Tool(fn)
    with pytest.raises(ValueError, match="tool name"):
        Tool(lambda: None, name="has space")


def test_unannotated_parameters_accept_any_json() -> None:
    def loose(x, y=3):
        """Anything goes."""

    t = Tool(loose)
    assert t.parameters["properties"] == {"x": {}, "y": {"default": 3}}
    assert t.parse_arguments('{"x": [1, {"a": null}]}') == {"x": [1, {"a": None}]}


@pytest.mark.parametrize(
    ("schema", "value", "ok"),
    [
        ({"type": "number", "minimum": 0, "maximum": 1}, 0.5, True),
        ({"type": "number", "exclusiveMaximum": 1}, 1, False),
        ({"const": 3}, 3.0, True),
        ({"const": True}, 1, False),
        ({"enum": [1, "a"]}, True, False),
        ({"allOf": [{"type": "string"}, {"maxLength": 2}]}, "abc", False),
        ({"oneOf": [{"type": "string"}, {"type": "integer"}]}, 3, True),
        ({"type": "array", "maxItems": 1}, [1, 2], False),
        (True, object(), True),
        (False, 1, False),
        ({"type": "object", "additionalProperties": {"type": "integer"}}, {"a": "b"}, False),
    ],
)
def test_the_validator_keywords(schema: Any, value: Any, ok: bool) -> None:
    assert (validate_json(schema, value) is None) is ok


def test_output_text_for_the_model() -> None:
    assert tool_output_text("plain") == "plain"
    assert tool_output_text({"a": "é"}) == '{"a": "é"}'
    assert tool_output_text(None) == "null"


@pytest.mark.asyncio
async def test_callable_objects_and_partials_are_tools() -> None:
    import functools

    class Adder:
        async def __call__(self, x: int) -> int:
            return x + 1

    async def repeat(times: int, word: str) -> str:
        return word * times

    adder = Tool(Adder(), name="adder")
    assert adder.is_async
    assert adder.parameters["properties"] == {"x": {"type": "integer"}}
    assert await adder.invoke({"x": 1}) == 2
    twice = Tool(functools.partial(repeat, 2), name="twice")
    assert twice.parameters["required"] == ["word"]
    assert await twice.invoke({"word": "ab"}) == "abab"
    with pytest.raises(ValueError, match="has no __name__"):
        Tool(Adder())
