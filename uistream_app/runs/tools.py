"""Tools: plain Python functions the model may call, with the JSON Schema
of their parameters derived from the type hints, and the validator the
loop checks arguments with. The supported hints and the rules the loop
applies (parse, invoke, timeout) are in docs/operations.md ("Tools").
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import enum
import functools
import inspect
import json
import re
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias, TypeVar, overload

from ..protocol.jsonbody import is_json
from ..protocol.ui.encoder import parse_tool_input
from .messages import ModelMessage, ToolSpec

__all__ = [
    "APPROVAL_KINDS",
    "ApprovalStatus",
    "Tool",
    "ToolArgumentsError",
    "ToolContext",
    "approval_status",
    "tool",
    "tool_output_text",
    "validate_json",
]

F = TypeVar("F", bound=Callable[..., Any])
Converter = Callable[[Any], Any]


@dataclass(frozen=True, slots=True)
class ToolContext:
    """What a tool (or a hook) may want to know about the call it serves."""

    tool_call_id: str
    tool_name: str
    arguments: Mapping[str, Any]
    step: int = 0
    messages: Sequence[ModelMessage] = ()
    #: What the run serves, as ``ToolLoop.run(context=...)`` was given it
    #: (the chat views give the ``PreparedRun``: its owner, its turn's extra
    #: body keys); ai@7's ``runtimeContext``.
    runtime_context: Any = None


ApprovalKind: TypeAlias = Literal["not-applicable", "user-approval", "approved", "denied"]
#: The answers of an approval rule, as ai@7's ``ToolApprovalStatus`` has them.
APPROVAL_KINDS: frozenset[str] = frozenset(("not-applicable", "user-approval", "approved", "denied"))


@dataclass(frozen=True, slots=True)
class ApprovalStatus:
    """What an approval rule says about one call (ai@7's
    ``ToolApprovalStatus``): ``not-applicable`` (run it), ``user-approval``
    (ask a person; ``reason`` is shown to them), ``approved`` or ``denied``
    (decided at once, automatically; ``reason`` goes with the decision)."""

    type: ApprovalKind
    reason: str | None = None


def approval_status(value: Any) -> ApprovalStatus | None:
    """An approval rule's answer as an ``ApprovalStatus``; None for None
    (no opinion). Takes what ai@7 takes (``"approved"``, ``{"type":
    "denied", "reason": "..."}``), an ``ApprovalStatus``, and a bool (a
    plain ``needs_approval``: True asks a person). Raises ``ValueError`` for
    anything else: a rule that answers nonsense must not run the tool."""
    if value is None or isinstance(value, ApprovalStatus):
        return value
    if isinstance(value, bool):
        return ApprovalStatus("user-approval" if value else "not-applicable")
    kind, reason = value, None
    if isinstance(value, Mapping):
        kind, reason = value.get("type"), value.get("reason")
    if kind not in APPROVAL_KINDS or (reason is not None and not isinstance(reason, str)):
        raise ValueError(f"not an approval status: {value!r}")
    return ApprovalStatus(kind, reason or None)


class ToolArgumentsError(ValueError):
    """The model's arguments were unusable. ``input`` is what it sent:
    the parsed JSON value where the text parsed, else the raw text."""

    def __init__(self, message: str, input: Any) -> None:
        super().__init__(message)
        self.input = input


def tool_output_text(value: Any) -> str:
    """A tool's return value as the text the model reads: a string as it
    is, anything else as JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, default=str)


# -- schema derivation ---------------------------------------------------------

_SIMPLE: dict[Any, str] = {str: "string", int: "integer", float: "number", bool: "boolean", type(None): "null"}
# ``get_origin`` maps the ``typing`` aliases (``List``, ``Sequence``…) to these.
_SEQUENCES = {list, tuple, set, frozenset, Sequence}
_MAPPINGS = {dict, Mapping}


def _schema(tp: Any, seen: frozenset[Any]) -> tuple[dict[str, Any], Converter | None]:
    """The JSON Schema for annotation ``tp`` and the converter that turns a
    validated JSON value into what the function expects (None: as is)."""
    if tp is Any or tp is inspect.Parameter.empty or tp is object:
        return {}, None
    if tp is None or tp is type(None):
        return {"type": "null"}, None
    if tp in _SIMPLE:
        return {"type": _SIMPLE[tp]}, (float if tp is float else None)
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin is typing.Annotated:
        schema, conv = _schema(args[0], seen)
        notes = [a for a in args[1:] if isinstance(a, str)]
        if notes:
            schema = {**schema, "description": " ".join(notes)}
        return schema, conv
    if origin is Literal:
        values = list(args)
        schema = {"enum": values}
        kinds = {_SIMPLE.get(type(v)) for v in values}
        if len(kinds) == 1 and None not in kinds:
            schema = {"type": kinds.pop(), "enum": values}
        return schema, None
    if origin is typing.Union or origin is types.UnionType:
        members = [_schema(a, seen) for a in args]
        schemas = [m[0] for m in members]
        if all(set(s) == {"type"} for s in schemas):
            merged: dict[str, Any] = {"type": [s["type"] for s in schemas]}
        else:
            merged = {"anyOf": schemas}
        if all(m[1] is None for m in members):
            return merged, None
        return merged, _union_converter([m[1] for m in members], schemas)
    if origin in _SEQUENCES or tp in _SEQUENCES:
        if origin is tuple and args and not (len(args) == 2 and args[1] is Ellipsis):
            parts = [_schema(a, seen) for a in args]
            schema = {
                "type": "array",
                "prefixItems": [p[0] for p in parts],
                "minItems": len(args),
                "maxItems": len(args),
            }
            part_convs = [p[1] for p in parts]
            return schema, lambda v: tuple(c(x) if c else x for c, x in zip(part_convs, v, strict=True))
        item_schema, item_conv = _schema(args[0], seen) if args else ({}, None)
        container: Callable[[Any], Any] = tuple if origin is tuple else set if origin in (set, frozenset) else list
        schema = {"type": "array", "items": item_schema}
        if item_conv is None and container is list:
            return schema, None
        return schema, lambda v: container(item_conv(x) if item_conv else x for x in v)
    if origin in _MAPPINGS or tp in _MAPPINGS:
        if args and args[0] is not str:
            raise TypeError(f"tool parameters: mapping keys must be str, not {args[0]!r}")
        value_schema, value_conv = _schema(args[1], seen) if args else ({}, None)
        schema = {"type": "object", "additionalProperties": value_schema}
        if value_conv is None:
            return schema, None
        return schema, lambda v: {k: value_conv(x) for k, x in v.items()}
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        values = [m.value for m in tp]
        return {"enum": values}, tp
    if tp in seen:
        raise TypeError(f"tool parameters: recursive type {tp!r} is not supported")
    if typing.is_typeddict(tp):
        hints = typing.get_type_hints(tp, include_extras=True)
        required = sorted(getattr(tp, "__required_keys__", set(hints)))
        props = {}
        convs: dict[str, Converter] = {}
        for key, hint in hints.items():
            props[key], conv = _schema(hint, seen | {tp})
            if conv is not None:
                convs[key] = conv
        schema = {"type": "object", "properties": props, "required": required, "additionalProperties": False}
        if not convs:
            return schema, None
        return schema, lambda v: {k: (convs[k](x) if k in convs else x) for k, x in v.items()}
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        hints = typing.get_type_hints(tp, include_extras=True)
        props = {}
        required = []
        field_convs: dict[str, Converter | None] = {}
        for f in dataclasses.fields(tp):
            if not f.init:
                continue
            props[f.name], field_convs[f.name] = _schema(hints.get(f.name, Any), seen | {tp})
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                required.append(f.name)
        schema = {"type": "object", "properties": props, "required": required, "additionalProperties": False}
        cls = tp

        def to_dataclass(v: Any) -> Any:
            kwargs = {}
            for k, x in v.items():
                conv = field_convs.get(k)
                kwargs[k] = conv(x) if conv else x
            return cls(**kwargs)

        return schema, to_dataclass
    raise TypeError(f"tool parameters: no JSON Schema for annotation {tp!r}")


def _union_converter(convs: Sequence[Converter | None], schemas: Sequence[Any]) -> Converter:
    def convert(value: Any) -> Any:
        for conv, schema in zip(convs, schemas, strict=True):
            if validate_json(schema, value) is None:
                return conv(value) if conv else value
        return value

    return convert


_ARGS_HEADER = re.compile(r"^\s*(Args|Arguments|Parameters)\s*:\s*$")
_GOOGLE_ARG = re.compile(r"^\s+(\*{0,2}\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")
_SPHINX_ARG = re.compile(r"^\s*:param\s+(?:[^:]*\s)?(\w+)\s*:\s*(.*)$")


def _parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """(the first paragraph, {parameter: description}) of a docstring."""
    if not doc:
        return "", {}
    lines = inspect.cleandoc(doc).splitlines()
    summary: list[str] = []
    for line in lines:
        if not line.strip() or _ARGS_HEADER.match(line) or _SPHINX_ARG.match(line):
            break
        summary.append(line.strip())
    params: dict[str, str] = {}
    in_args = False
    current: str | None = None
    arg_indent = 0
    for line in lines:
        if _ARGS_HEADER.match(line):
            in_args, current = True, None
            continue
        sphinx = _SPHINX_ARG.match(line)
        if sphinx:
            current = sphinx.group(1)
            params[current] = sphinx.group(2).strip()
            continue
        if not in_args:
            continue
        if line.strip() and not line.startswith((" ", "\t")):
            in_args, current = False, None
            continue
        google = _GOOGLE_ARG.match(line)
        indent = len(line) - len(line.lstrip())
        if google and (current is None or indent <= arg_indent):
            current = google.group(1).lstrip("*")
            arg_indent = indent
            params[current] = google.group(2).strip()
        elif current and line.strip():
            params[current] = (params[current] + " " + line.strip()).strip()
    return " ".join(summary), params


# -- validation ----------------------------------------------------------------

_JSON_TYPES: dict[str, Callable[[Any], bool]] = {
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: (isinstance(v, int) and not isinstance(v, bool)) or (isinstance(v, float) and v.is_integer()),
    "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
    "array": lambda v: isinstance(v, list),
    "object": lambda v: isinstance(v, dict),
}


def _json_type_name(value: Any) -> str:
    for name in ("null", "boolean", "integer", "number", "string", "array", "object"):
        if _JSON_TYPES[name](value):
            return name
    return type(value).__name__


def validate_json(schema: Mapping[str, Any] | bool, value: Any, path: str = "") -> str | None:
    """None if ``value`` fits ``schema``, else a message naming where and
    why it does not (docs/operations.md, "Tools", lists the keywords checked)."""
    if schema is True:
        return None
    if schema is False:
        return f"{path or 'the arguments'}: not allowed"
    where = f"`{path}`" if path else "the arguments"
    expected = schema.get("type")
    if expected is not None:
        names = [expected] if isinstance(expected, str) else list(expected)
        if not any(_JSON_TYPES.get(n, lambda v: True)(value) for n in names):
            return f"{where}: expected {' or '.join(names)}, got {_json_type_name(value)}"
    if "enum" in schema and not any(_json_equal(value, e) for e in schema["enum"]):
        return f"{where}: must be one of {json.dumps(schema['enum'], ensure_ascii=False)}"
    if "const" in schema and not _json_equal(value, schema["const"]):
        return f"{where}: must be {json.dumps(schema['const'], ensure_ascii=False)}"
    for key in ("anyOf", "oneOf"):
        if key in schema:
            errors = [validate_json(s, value, path) for s in schema[key]]
            if all(e is not None for e in errors):
                return errors[0] if len(errors) == 1 else f"{where}: fits none of the allowed shapes ({errors[0]})"
    for sub in schema.get("allOf", ()):
        error = validate_json(sub, value, path)
        if error is not None:
            return error
    if isinstance(value, int | float) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            return f"{where}: must be at least {schema['minimum']}"
        if "maximum" in schema and value > schema["maximum"]:
            return f"{where}: must be at most {schema['maximum']}"
        if "exclusiveMinimum" in schema and value <= schema["exclusiveMinimum"]:
            return f"{where}: must be more than {schema['exclusiveMinimum']}"
        if "exclusiveMaximum" in schema and value >= schema["exclusiveMaximum"]:
            return f"{where}: must be less than {schema['exclusiveMaximum']}"
    elif isinstance(value, str):
        if "minLength" in schema and len(value) < schema["minLength"]:
            return f"{where}: must be at least {schema['minLength']} characters"
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            return f"{where}: must be at most {schema['maxLength']} characters"
    elif isinstance(value, list):
        if "minItems" in schema and len(value) < schema["minItems"]:
            return f"{where}: must have at least {schema['minItems']} items"
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            return f"{where}: must have at most {schema['maxItems']} items"
        prefix = schema.get("prefixItems", ())
        for i, item in enumerate(value):
            sub = prefix[i] if i < len(prefix) else schema.get("items", True)
            error = validate_json(sub, item, f"{path}[{i}]")
            if error is not None:
                return error
    elif isinstance(value, dict):
        props = schema.get("properties", {})
        for name in schema.get("required", ()):
            if name not in value:
                return f"`{_join(path, name)}` is required"
        extra = schema.get("additionalProperties", True)
        for name, item in value.items():
            sub = props.get(name)
            if sub is None:
                if extra is False:
                    return f"`{_join(path, name)}` is not a known parameter"
                sub = extra
            error = validate_json(sub, item, _join(path, name))
            if error is not None:
                return error
    return None


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _json_equal(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    return type(a) is type(b) and bool(a == b)


# -- the Tool ------------------------------------------------------------------


class Tool:
    """A function the model may call (the rules the loop applies:
    docs/operations.md, "Tools"); ``spec`` is what the model is told."""

    #: A client-side tool has no server implementation: the browser runs it
    #: (``addToolResult``) and the run waits for its result.
    client_side: bool = False

    def needs_approval(self, arguments: dict[str, Any], context: ToolContext | None = None) -> Any:
        """Whether a call with these (validated) arguments waits for a
        person's approval: ``requires_approval`` itself, or what it answers
        when it is a function of the arguments (and, when it takes two
        parameters, the call's ``ToolContext``). A function may also answer
        an approval status (``"approved"``, ``{"type": "denied", "reason":
        …}``) or be async; the loop reads it with ``approval()``."""
        rule = self.requires_approval
        if not callable(rule):
            return bool(rule)
        if self._rule_takes_context:
            return rule(arguments, context)
        result = rule(arguments)
        return bool(result) if isinstance(result, bool | int) else result

    async def approval(self, arguments: dict[str, Any], context: ToolContext | None = None) -> ApprovalStatus:
        """``needs_approval`` awaited and read as an ``ApprovalStatus``."""
        answer = self.needs_approval(arguments, context)
        if inspect.isawaitable(answer):
            answer = await answer
        return approval_status(answer) or ApprovalStatus("not-applicable")

    def __init__(
        self,
        function: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        parameters: Mapping[str, Any] | None = None,
        timeout: float | None = None,
        requires_approval: bool | Callable[..., Any] = False,
        run_sync_in_thread: bool = True,
        editable_arguments: bool = False,
        idempotent: bool = False,
    ) -> None:
        self.function = function
        name = name or getattr(function, "__name__", None)
        if not name:
            raise ValueError(f"{function!r} has no __name__: pass Tool(..., name=...)")
        self.name = name
        if not re.fullmatch(r"[A-Za-z0-9_-]{1,64}", self.name):
            raise ValueError(f"tool name {self.name!r}: use 1-64 letters, digits, '_' or '-'")
        summary, param_docs = _parse_docstring(inspect.getdoc(function))
        self.description = description if description is not None else summary
        self.timeout = timeout
        # True, False, or a rule over the validated arguments (and context).
        self.requires_approval = requires_approval
        self._rule_takes_context = callable(requires_approval) and _positional_count(requires_approval) >= 2
        #: Whether a person who approves a call may change its arguments
        #: (the edited call is what runs; the original is kept beside it).
        self.editable_arguments = editable_arguments
        #: Whether running a call twice is harmless (a read, a lookup): a
        #: call whose process died before its result was logged runs again
        #: when its run is continued; any other tool's such call gets a tool
        #: error instead (docs/operations.md, "Continuing a run whose
        #: process is gone").
        self.idempotent = idempotent
        # An object whose __call__ is async counts as async too.
        self.is_async = inspect.iscoroutinefunction(function) or inspect.iscoroutinefunction(type(function).__call__)
        #: An async generator streams: each value it yields is sent as a
        #: preliminary output, and the last one is the call's output (ai@7's
        #: rule for an ``execute`` that returns an AsyncIterable).
        self.streams = inspect.isasyncgenfunction(function) or inspect.isasyncgenfunction(type(function).__call__)
        self.run_sync_in_thread = run_sync_in_thread
        self._context_param: str | None = None
        self._converters: dict[str, Converter] = {}
        if parameters is None:
            self.parameters: dict[str, Any] = self._derive(function, param_docs)
        else:
            # An explicit schema: arguments go through as JSON values, and
            # only a ``ToolContext`` parameter is looked for in the hints.
            self.parameters = dict(parameters)
            hints = getattr(function, "__annotations__", {})
            self._context_param = next(
                (k for k, v in hints.items() if v in (ToolContext, "ToolContext") and k != "return"), None
            )
        functools.update_wrapper(self, function)

    def _derive(self, function: Callable[..., Any], param_docs: Mapping[str, str]) -> dict[str, Any]:
        signature = inspect.signature(function)
        # A callable object's hints are its __call__'s; a partial's, its function's.
        target: Any = function
        if isinstance(function, functools.partial):
            target = function.func
        elif not (inspect.isfunction(function) or inspect.ismethod(function)):
            target = type(function).__call__
        try:
            hints = typing.get_type_hints(target, include_extras=True)
        except (NameError, TypeError) as exc:
            raise TypeError(f"tool {self.name!r}: cannot read its type hints: {exc}") from exc
        properties: dict[str, Any] = {}
        required: list[str] = []
        for param in signature.parameters.values():
            if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
                raise TypeError(f"tool {self.name!r}: *args and **kwargs have no JSON Schema")
            if param.kind is param.POSITIONAL_ONLY:
                raise TypeError(f"tool {self.name!r}: positional-only parameter {param.name!r}")
            hint = hints.get(param.name, Any)
            if hint is ToolContext:
                self._context_param = param.name
                continue
            try:
                schema, conv = _schema(hint, frozenset())
            except TypeError as exc:
                raise TypeError(f"tool {self.name!r}, parameter {param.name!r}: {exc}") from None
            if param.name in param_docs and "description" not in schema:
                schema = {**schema, "description": param_docs[param.name]}
            if param.default is param.empty:
                required.append(param.name)
            elif is_json(param.default):
                schema = {**schema, "default": param.default}
            properties[param.name] = schema
            if conv is not None:
                self._converters[param.name] = conv
        return {"type": "object", "properties": properties, "required": required, "additionalProperties": False}

    @property
    def spec(self) -> ToolSpec:
        return ToolSpec(self.name, self.description, self.parameters)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """The wrapped function, called directly (outside any run)."""
        return self.function(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<Tool {self.name}>"

    def parse_arguments(self, text: str) -> dict[str, Any]:
        """The model's argument text as validated keyword
        arguments (an empty text is an empty object)."""
        try:
            value = parse_tool_input(self.name, text)
        except ValueError as exc:
            raise ToolArgumentsError(str(exc), text) from None
        if not isinstance(value, dict):
            raise ToolArgumentsError(
                f"Arguments of {self.name} must be a JSON object, got {_json_type_name(value)}", value
            )
        error = validate_json(self.parameters, value)
        if error is not None:
            raise ToolArgumentsError(f"Invalid arguments for {self.name}: {error}", value)
        return value

    async def invoke(
        self,
        arguments: Mapping[str, Any],
        context: ToolContext | None = None,
        progress: Callable[[Any], None] | None = None,
    ) -> Any:
        """Call the function with validated ``arguments`` (a sync one in a
        worker thread unless ``run_sync_in_thread=False``). A streaming
        tool's every value goes to ``progress``; its last is returned (None
        when it yields nothing)."""
        kwargs = {k: (self._converters[k](v) if k in self._converters else v) for k, v in arguments.items()}
        if self._context_param is not None:
            kwargs[self._context_param] = context
        if self.streams:
            last = None
            async with contextlib.aclosing(self.function(**kwargs)) as values:
                async for value in values:
                    last = value
                    if progress is not None:
                        progress(value)
            return last
        if self.is_async:
            return await self.function(**kwargs)
        if self.run_sync_in_thread:
            return await asyncio.to_thread(self.function, **kwargs)
        result = self.function(**kwargs)
        if inspect.isawaitable(result):
            return await result
        return result


def _positional_count(function: Callable[..., Any]) -> int:
    """How many positional arguments ``function`` takes (a large number for
    ``*args``); 1 when its signature can't be read."""
    try:
        parameters = inspect.signature(function).parameters.values()
    except (TypeError, ValueError):
        return 1
    count = 0
    for p in parameters:
        if p.kind is p.VAR_POSITIONAL:
            return 1 << 16
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            count += 1
    return count


@overload
def tool(function: F, /) -> Tool: ...
@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    parameters: Mapping[str, Any] | None = None,
    timeout: float | None = None,
    requires_approval: bool | Callable[..., Any] = False,
    run_sync_in_thread: bool = True,
    editable_arguments: bool = False,
    idempotent: bool = False,
) -> Callable[[F], Tool]: ...
def tool(
    function: F | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    parameters: Mapping[str, Any] | None = None,
    timeout: float | None = None,
    requires_approval: bool | Callable[..., Any] = False,
    run_sync_in_thread: bool = True,
    editable_arguments: bool = False,
    idempotent: bool = False,
) -> Tool | Callable[[F], Tool]:
    """Make a ``Tool`` of a function: ``@tool`` or ``@tool(timeout=5)``."""

    def wrap(fn: F) -> Tool:
        return Tool(
            fn,
            name=name,
            description=description,
            parameters=parameters,
            timeout=timeout,
            requires_approval=requires_approval,
            run_sync_in_thread=run_sync_in_thread,
            editable_arguments=editable_arguments,
            idempotent=idempotent,
        )

    return wrap(function) if function is not None else wrap


def _runs_in_the_browser(**kwargs: Any) -> Any:
    raise RuntimeError("a client-side tool runs in the browser, not on the server")


class ClientTool(Tool):
    """A tool the browser runs (useChat's ``onToolCall`` + ``addToolResult``).

    The model is told about it like any tool; when it is called, the run
    streams the call's input and ends waiting; the client's result continues
    the same message (the server accepts it once, for a call that is pending
    in the stored conversation, from its owner)."""

    client_side = True

    def __init__(self, name: str, *, description: str = "", parameters: Mapping[str, Any] | None = None) -> None:
        super().__init__(
            _runs_in_the_browser,
            name=name,
            description=description,
            parameters=parameters if parameters is not None else {"type": "object", "properties": {}},
        )
