"""``UIMessageReader``: UI message chunks in, the assistant ``UIMessage`` out.

The Python twin of ai@7.0.173's ``processUIMessageStream``, which both
``useChat`` and ``readUIMessageStream`` run. It builds the stored message
from the canonical log, so what is stored is what the browser built: the
message is a plain JSON object exactly as the SDK's would serialise with
``JSON.stringify``. No I/O, no Django. Its rules are the reader rules of
docs/protocols.md ("rule N" in this module means reader rule N there).

Deliberate divergences, each invisible in the resulting JSON: text is kept
as a list of pieces until read, and a tool call's partial input is parsed
only when the message is read or a non-delta chunk arrives, not on every
delta (the SDK re-parses the whole text per delta, quadratic in pure
Python). Two differences can show: numbers parse as Python numbers (an
integer beyond 2**53 stays exact where JavaScript would round it), and
objects keep their keys in arrival order (JavaScript moves integer-like keys
such as ``"0"`` first); neither changes ``==``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Iterator
from typing import Any, ClassVar, Final, NoReturn

from ..jsonbody import refuse_json_constant
from .chunks import Chunk, validate_chunk
from .parts import is_tool_type

__all__ = [
    "UIMessageReader",
    "UIMessageStreamError",
    "fix_json",
    "merge_objects",
    "parse_partial_json",
    "read_ui_message",
]


class _Undefined:
    """JavaScript's ``undefined``: a key that holds it is left out of the
    JSON, but keeps its place in the object's key order."""

    _instance: _Undefined | None = None

    def __new__(cls) -> _Undefined:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "undefined"

    def __bool__(self) -> bool:
        return False


UNDEFINED: Final = _Undefined()


class UIMessageStreamError(ValueError):
    """A chunk the SDK's ``processUIMessageStream`` throws on (ai@6/7
    ``UIMessageStreamError``), or any chunk after one."""

    def __init__(self, message: str, *, chunk_type: str, chunk_id: str = "") -> None:
        super().__init__(message)
        self.chunk_type = chunk_type
        self.chunk_id = chunk_id


# -- JavaScript value semantics ------------------------------------------------


def _nullish(value: Any) -> bool:
    return value is None or value is UNDEFINED


def _truthy(value: Any) -> bool:
    """JavaScript truthiness for JSON values (``{}`` and ``[]`` are true)."""
    if value is None or value is UNDEFINED or value is False:
        return False
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return value == value and value != 0  # NaN is falsy
    if isinstance(value, str):
        return value != ""
    return True


def _export(value: Any) -> Any:
    """A deep copy with ``undefined`` keys dropped (what ``JSON.stringify``
    keeps)."""
    if isinstance(value, dict):
        return {k: _export(v) for k, v in value.items() if v is not UNDEFINED}
    if isinstance(value, list):
        return [None if v is UNDEFINED else _export(v) for v in value]
    return value


def _copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value


# -- mergeObjects ----------------------------------------------------------------

_UNSAFE_KEYS: Final = frozenset(("__proto__", "constructor", "prototype"))


def _own_entries(value: Any) -> Iterator[tuple[str, Any]]:
    """``for (key in value)`` with ``hasOwnProperty``: object keys, array and
    string indices."""
    if isinstance(value, dict):
        yield from value.items()
    elif isinstance(value, (list, str)):
        for i, item in enumerate(value):
            yield str(i), item


def _has(container: Any, key: str) -> bool:
    """``key in container``; JavaScript throws for a primitive."""
    if isinstance(container, dict):
        return key in container
    if isinstance(container, list):
        return key.isdigit() and int(key) < len(container)
    raise TypeError(f"Cannot use 'in' operator to search for '{key}' in {container}")


def merge_objects(base: Any, overrides: Any) -> Any:
    """The SDK's ``mergeObjects`` (``src/util/merge-objects.ts``): ``overrides``
    deep-merged over ``base`` into a new object; arrays and primitives
    replace; ``UNDEFINED`` values are skipped. Raises ``TypeError`` where the
    SDK would (a primitive ``base`` with keyed ``overrides``)."""
    if base is UNDEFINED:
        return overrides
    if overrides is UNDEFINED:
        return base
    result: dict[str, Any] = dict(_own_entries(base))  # ``{...base}``
    for key, value in _own_entries(overrides):
        if key in _UNSAFE_KEYS or value is UNDEFINED:
            continue
        base_value = base[key if isinstance(base, dict) else int(key)] if _has(base, key) else UNDEFINED
        if isinstance(value, dict) and isinstance(base_value, dict):
            result[key] = merge_objects(base_value, value)
        else:
            result[key] = value
    return result


# -- parsePartialJson / fixJson --------------------------------------------------


class _JsonFixer:
    """``fixJson``'s state machine: one method per parser state, each given
    the next character. ``stack`` holds the states of the values still open
    (``ROOT`` at the bottom); ``last_valid`` is the index of the last
    character that ends a complete token."""

    __slots__ = ("last_valid", "literal_start", "stack", "text", "unicode_digits")

    def __init__(self, text: str) -> None:
        self.text = text
        self.stack = ["ROOT"]
        self.last_valid = -1
        self.literal_start = 0
        self.unicode_digits = 0

    def run(self) -> str:
        states = self._STATES
        for i, char in enumerate(self.text):
            if self.stack:
                states[self.stack[-1]](self, char, i)
        return self.text[: self.last_valid + 1] + self._closing()

    def _closing(self) -> str:
        """What closes every value still open, innermost first."""
        out = ""
        for state in reversed(self.stack):
            if state == "STRING":
                out += '"'
            elif state.startswith("OBJECT"):
                out += "}"
            elif state.startswith("ARRAY"):
                out += "]"
            elif state == "LITERAL":
                partial = self.text[self.literal_start :]
                for word in ("true", "false", "null"):
                    if word.startswith(partial):
                        out += word[len(partial) :]
                        break
        return out

    # -- helpers shared by several states -----------------------------------

    def _value_start(self, char: str, i: int, swap: str) -> None:
        """A value may start here: the open container moves on to ``swap``
        and the value's own state is pushed."""
        stack = self.stack
        if char == '"':
            self.last_valid = i
            stack[-1] = swap
            stack.append("STRING")
        elif char in "ftn":
            self.last_valid = i
            self.literal_start = i
            stack[-1] = swap
            stack.append("LITERAL")
        elif char == "-":
            stack[-1] = swap
            stack.append("NUMBER")
        elif "0" <= char <= "9":
            self.last_valid = i
            stack[-1] = swap
            stack.append("NUMBER")
        elif char == "{":
            self.last_valid = i
            stack[-1] = swap
            stack.append("OBJECT_START")
        elif char == "[":
            self.last_valid = i
            stack[-1] = swap
            stack.append("ARRAY_START")

    def _after_object_value(self, char: str, i: int) -> None:
        if char == ",":
            self.stack[-1] = "OBJECT_AFTER_COMMA"
        elif char == "}":
            self.last_valid = i
            self.stack.pop()

    def _after_array_value(self, char: str, i: int) -> None:
        if char == ",":
            self.stack[-1] = "ARRAY_AFTER_COMMA"
        elif char == "]":
            self.last_valid = i
            self.stack.pop()

    # -- one method per state -----------------------------------------------

    def _root(self, char: str, i: int) -> None:
        self._value_start(char, i, "FINISH")

    def _finish(self, char: str, i: int) -> None:
        """After the top-level value: the rest is ignored."""

    def _object_start(self, char: str, i: int) -> None:
        if char == '"':
            self.stack[-1] = "OBJECT_KEY"
        elif char == "}":
            self.last_valid = i
            self.stack.pop()

    def _object_after_comma(self, char: str, i: int) -> None:
        if char == '"':
            self.stack[-1] = "OBJECT_KEY"

    def _object_key(self, char: str, i: int) -> None:
        if char == '"':
            self.stack[-1] = "OBJECT_AFTER_KEY"

    def _object_after_key(self, char: str, i: int) -> None:
        if char == ":":
            self.stack[-1] = "OBJECT_BEFORE_VALUE"

    def _object_before_value(self, char: str, i: int) -> None:
        self._value_start(char, i, "OBJECT_AFTER_VALUE")

    def _string(self, char: str, i: int) -> None:
        if char == '"':
            self.stack.pop()
            self.last_valid = i
        elif char == "\\":
            self.stack.append("STRING_ESCAPE")
        else:
            self.last_valid = i

    def _string_escape(self, char: str, i: int) -> None:
        self.stack.pop()
        if char == "u":
            self.unicode_digits = 0
            self.stack.append("STRING_UNICODE_ESCAPE")
        else:
            self.last_valid = i

    def _string_unicode_escape(self, char: str, i: int) -> None:
        if char in "0123456789abcdefABCDEF":
            self.unicode_digits += 1
            if self.unicode_digits == 4:
                self.stack.pop()
                self.last_valid = i

    def _array_start(self, char: str, i: int) -> None:
        if char == "]":
            self.last_valid = i
            self.stack.pop()
        else:
            self._value_start(char, i, "ARRAY_AFTER_VALUE")

    def _array_after_value(self, char: str, i: int) -> None:
        if char == ",":
            self.stack[-1] = "ARRAY_AFTER_COMMA"
        elif char == "]":
            self.last_valid = i
            self.stack.pop()
        else:
            self.last_valid = i

    def _array_after_comma(self, char: str, i: int) -> None:
        self._value_start(char, i, "ARRAY_AFTER_VALUE")

    def _number(self, char: str, i: int) -> None:
        stack = self.stack
        if "0" <= char <= "9":
            self.last_valid = i
        elif char in "eE-.":
            pass
        elif char == ",":
            stack.pop()
            if stack and stack[-1] == "ARRAY_AFTER_VALUE":
                self._after_array_value(char, i)
            if stack and stack[-1] == "OBJECT_AFTER_VALUE":
                self._after_object_value(char, i)
        elif char == "}":
            stack.pop()
            if stack and stack[-1] == "OBJECT_AFTER_VALUE":
                self._after_object_value(char, i)
        elif char == "]":
            stack.pop()
            if stack and stack[-1] == "ARRAY_AFTER_VALUE":
                self._after_array_value(char, i)
        else:
            stack.pop()

    def _literal(self, char: str, i: int) -> None:
        partial = self.text[self.literal_start : i + 1]
        if "false".startswith(partial) or "true".startswith(partial) or "null".startswith(partial):
            self.last_valid = i
            return
        stack = self.stack
        stack.pop()
        if stack and stack[-1] == "OBJECT_AFTER_VALUE":
            self._after_object_value(char, i)
        elif stack and stack[-1] == "ARRAY_AFTER_VALUE":
            self._after_array_value(char, i)

    _STATES: Final[dict[str, Callable[[_JsonFixer, str, int], None]]] = {
        "ROOT": _root,
        "FINISH": _finish,
        "OBJECT_START": _object_start,
        "OBJECT_AFTER_COMMA": _object_after_comma,
        "OBJECT_KEY": _object_key,
        "OBJECT_AFTER_KEY": _object_after_key,
        "OBJECT_BEFORE_VALUE": _object_before_value,
        "OBJECT_AFTER_VALUE": _after_object_value,
        "STRING": _string,
        "STRING_ESCAPE": _string_escape,
        "STRING_UNICODE_ESCAPE": _string_unicode_escape,
        "ARRAY_START": _array_start,
        "ARRAY_AFTER_VALUE": _array_after_value,
        "ARRAY_AFTER_COMMA": _array_after_comma,
        "NUMBER": _number,
        "LITERAL": _literal,
    }


def fix_json(text: str) -> str:
    """The SDK's ``fixJson`` (``src/util/fix-json.ts``): cut a JSON prefix back
    to its last complete token and close what is open. Invalid JSON is not
    repaired, only truncated JSON."""
    return _JsonFixer(text).run()


# secure-json-parse, as @ai-sdk/provider-utils configures it: a parsed value
# with an own ``__proto__`` key, or a ``constructor`` object with an own
# ``prototype``, is a parse failure.
_SUSPECT_PROTO: Final = re.compile(
    r'"(?:_|\\u005[Ff])(?:_|\\u005[Ff])(?:p|\\u0070)(?:r|\\u0072)(?:o|\\u006[Ff])(?:t|\\u0074)'
    r'(?:o|\\u006[Ff])(?:_|\\u005[Ff])(?:_|\\u005[Ff])"\s*:'
)
_SUSPECT_CONSTRUCTOR: Final = re.compile(
    r'"(?:c|\\u0063)(?:o|\\u006[Ff])(?:n|\\u006[Ee])(?:s|\\u0073)(?:t|\\u0074)(?:r|\\u0072)'
    r'(?:u|\\u0075)(?:c|\\u0063)(?:t|\\u0074)(?:o|\\u006[Ff])(?:r|\\u0072)"\s*:'
)


def _secure_loads(text: str) -> Any:
    value = json.loads(text, parse_constant=refuse_json_constant)
    if not isinstance(value, (dict, list)):
        return value
    if _SUSPECT_PROTO.search(text) is None and _SUSPECT_CONSTRUCTOR.search(text) is None:
        return value
    pending: list[Any] = [value]
    while pending:
        node = pending.pop()
        if isinstance(node, dict):
            if "__proto__" in node:
                raise ValueError("Object contains forbidden prototype property")
            ctor = node.get("constructor")
            if isinstance(ctor, dict) and "prototype" in ctor:
                raise ValueError("Object contains forbidden prototype property")
            pending.extend(v for v in node.values() if isinstance(v, (dict, list)))
        else:
            pending.extend(v for v in node if isinstance(v, (dict, list)))
    return value


def parse_partial_json(text: str | None) -> tuple[Any, str]:
    """The SDK's ``parsePartialJson``: ``(value, state)`` where ``state`` is
    ``"successful-parse"``, ``"repaired-parse"`` (the text was cut short and
    ``fix_json`` closed it), ``"failed-parse"`` or ``"undefined-input"``. The
    value is ``None`` for the last two (the SDK's ``undefined``)."""
    if text is None:
        return None, "undefined-input"
    try:
        return _secure_loads(text), "successful-parse"
    except ValueError:
        pass
    try:
        return _secure_loads(fix_json(text)), "repaired-parse"
    except ValueError:
        return None, "failed-parse"


def _partial_input(text: str) -> Any:
    value, state = parse_partial_json(text)
    return UNDEFINED if state == "failed-parse" else value


# -- the reader ------------------------------------------------------------------

_OUTPUT_STATES: Final = frozenset(("output-available", "output-error"))
_DELTA_TYPES: Final = frozenset(("text-delta", "reasoning-delta", "tool-input-delta"))


def _is_static_tool(part: dict[str, Any]) -> bool:
    return str(part.get("type", "")).startswith("tool-")


def _is_tool(part: dict[str, Any]) -> bool:
    return is_tool_type(part.get("type"))


def _static_tool_name(part: dict[str, Any]) -> str:
    return "-".join(str(part["type"]).split("-")[1:])


class _PartialToolCall:
    __slots__ = ("dynamic", "input_encoding", "text", "title", "tool_metadata", "tool_name")

    def __init__(
        self, *, text: str, input_encoding: Any, tool_name: str, dynamic: Any, title: Any, tool_metadata: Any
    ) -> None:
        self.text = text
        self.input_encoding = input_encoding
        self.tool_name = tool_name
        self.dynamic = dynamic
        self.title = title
        self.tool_metadata = tool_metadata


class UIMessageReader:
    """Feed ai@7 chunks, read the assistant ``UIMessage`` they build.

    ``message`` is a snapshot: a new JSON-shaped dict on every read.
    ``finish_reason``, ``error_text``, ``aborted``/``abort_reason`` and
    ``finished`` record what the stream said about its end. See the module
    docstring for the rules.
    """

    def __init__(
        self,
        *,
        message: dict[str, Any] | None = None,
        message_id: str = "",
        on_data: Callable[[Chunk], object] | None = None,
        validate: bool = False,
        reset_on_message_id_change: bool = False,
        reset_on_first_start: bool = False,
        stop_on_error: bool = False,
    ) -> None:
        self._on_data = on_data
        self._validate = validate
        self._reset_on_id_change = reset_on_message_id_change
        self._reset_on_first_start = reset_on_first_start
        self._stop_on_error = stop_on_error
        self._first_start = True
        self._failure: UIMessageStreamError | None = None
        self.finish_reason: str | None = None
        self.finished = False
        self.error_text: str | None = None
        self.aborted = False
        self.abort_reason: str | None = None
        self._init_state(message, message_id)

    def _init_state(self, last_message: dict[str, Any] | None, message_id: str) -> None:
        # Rule 1 (the SDK's createStreamingUIMessageState).
        if last_message is not None and last_message.get("role") == "assistant":
            self._message: dict[str, Any] = _copy(last_message)
            if not isinstance(self._message.get("parts"), list):
                self._message["parts"] = []
        else:
            self._message = {"id": message_id, "metadata": UNDEFINED, "role": "assistant", "parts": []}
        self._active_text: dict[str, dict[str, Any]] = {}
        self._active_reasoning: dict[str, dict[str, Any]] = {}
        self._partial_calls: dict[str, _PartialToolCall] = {}
        # Laziness (see the module docstring): text pieces and partial
        # inputs not yet written into their parts, keyed by id(part).
        self._pending_text: dict[int, tuple[dict[str, Any], list[str]]] = {}
        self._pending_input: dict[int, tuple[dict[str, Any], str]] = {}
        for part in self._current_step_parts():
            if not _is_tool(part) or part.get("state") != "input-streaming":
                continue
            raw = part.get("rawInput")
            dynamic = part.get("type") == "dynamic-tool"
            self._partial_calls[str(part.get("toolCallId"))] = _PartialToolCall(
                text=raw if isinstance(raw, str) else "",
                input_encoding=part.get("inputEncoding", UNDEFINED),
                tool_name=str(part.get("toolName")) if dynamic else _static_tool_name(part),
                dynamic=dynamic,
                title=part.get("title", UNDEFINED),
                tool_metadata=part.get("toolMetadata", UNDEFINED),
            )

    # -- public API -------------------------------------------------------------

    @property
    def message(self) -> dict[str, Any]:
        """The message so far, as ``JSON.stringify`` would write the SDK's."""
        self._flush()
        out: dict[str, Any] = _export(self._message)
        return out

    @property
    def failed(self) -> bool:
        """True after a chunk the reader refused; it takes no more input."""
        return self._failure is not None

    def feed(self, chunk: Chunk) -> None:
        """Apply one chunk. Raises ``UIMessageStreamError`` (rule 18)."""
        chunk_type = chunk.get("type") if isinstance(chunk, dict) else None
        if self._failure is not None:
            raise UIMessageStreamError(
                f"The reader stopped at an earlier error and takes no more chunks: {self._failure}",
                chunk_type=str(chunk_type),
            )
        if self._stop_on_error and self.error_text is not None:
            return
        if not isinstance(chunk_type, str):
            self._fail(UIMessageStreamError("A chunk is an object with a string 'type'.", chunk_type=str(chunk_type)))
        if self._validate:
            try:
                validate_chunk(chunk)
            except ValueError as exc:
                self._fail(UIMessageStreamError(str(exc), chunk_type=chunk_type))
        if chunk_type not in _DELTA_TYPES:
            self._flush()
        try:
            self._apply(chunk_type, chunk)
        except UIMessageStreamError as exc:
            self._fail(exc)
        except TypeError as exc:  # mergeObjects on a primitive, as in JavaScript
            self._fail(UIMessageStreamError(str(exc), chunk_type=chunk_type))
        except KeyError as exc:  # a required field is missing
            self._fail(UIMessageStreamError(f"{chunk_type}: missing required field {exc}", chunk_type=chunk_type))

    def feed_all(self, chunks: Iterable[Chunk]) -> None:
        for chunk in chunks:
            self.feed(chunk)

    # -- internals ----------------------------------------------------------------

    def _fail(self, exc: UIMessageStreamError) -> NoReturn:
        self._failure = exc
        raise exc

    def _flush(self) -> None:
        if self._pending_text:
            for part, pieces in self._pending_text.values():
                part["text"] = "".join(pieces)
            self._pending_text.clear()
        if self._pending_input:
            for part, text in self._pending_input.values():
                part["input"] = _partial_input(text)
            self._pending_input.clear()

    @property
    def _parts(self) -> list[dict[str, Any]]:
        parts: list[dict[str, Any]] = self._message["parts"]
        return parts

    def _current_step_parts(self) -> list[dict[str, Any]]:
        parts = self._parts
        i = len(parts) - 1
        while i >= 0 and parts[i].get("type") != "step-start":
            i -= 1
        return parts[i + 1 :]

    def _find_tool(self, tool_call_id: Any) -> dict[str, Any]:
        # Rule 10 (getToolInvocation).
        for part in self._current_step_parts():
            if _is_tool(part) and part.get("toolCallId") == tool_call_id:
                return part
        for earlier in self._parts[::-1]:
            if _is_tool(earlier) and earlier.get("toolCallId") == tool_call_id:
                return earlier
        raise UIMessageStreamError(
            f'No tool invocation found for tool call ID "{tool_call_id}".',
            chunk_type="tool-invocation",
            chunk_id=str(tool_call_id),
        )

    def _update_metadata(self, metadata: Any) -> None:
        if _nullish(metadata):
            return
        current = self._message.get("metadata", UNDEFINED)
        self._message["metadata"] = metadata if _nullish(current) else merge_objects(current, metadata)

    def _update_tool_part(
        self,
        *,
        dynamic: bool,
        tool_name: Any,
        tool_call_id: Any,
        state: str,
        input: Any = UNDEFINED,
        raw_input: Any = UNDEFINED,
        input_encoding: Any = UNDEFINED,
        output: Any = UNDEFINED,
        error_text: Any = UNDEFINED,
        preliminary: Any = UNDEFINED,
        provider_executed: Any = UNDEFINED,
        provider_metadata: Any = UNDEFINED,
        title: Any = UNDEFINED,
        tool_metadata: Any = UNDEFINED,
        existing: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """The SDK's ``updateToolPart`` (``dynamic=False``) and
        ``updateDynamicToolPart`` (``dynamic=True``), rules 6 and 12."""
        part = existing
        if part is None:
            for candidate in self._current_step_parts():
                kind_matches = candidate.get("type") == "dynamic-tool" if dynamic else _is_static_tool(candidate)
                if kind_matches and candidate.get("toolCallId") == tool_call_id:
                    part = candidate
                    break
        is_result = state in _OUTPUT_STATES
        if part is not None:
            part["state"] = state
            if dynamic:
                part["toolName"] = tool_name
            else:
                part["type"] = f"tool-{tool_name}"
            part["input"] = input
            part["output"] = output
            part["errorText"] = error_text
            part["rawInput"] = raw_input
            if _nullish(input_encoding):
                part.pop("inputEncoding", None)
            else:
                part["inputEncoding"] = input_encoding
            part["preliminary"] = preliminary
            if title is not UNDEFINED:
                part["title"] = title
            if tool_metadata is not UNDEFINED:
                part["toolMetadata"] = tool_metadata
            if _nullish(provider_executed):
                provider_executed = part.get("providerExecuted", UNDEFINED)
            part["providerExecuted"] = provider_executed
            if not _nullish(provider_metadata):
                part["resultProviderMetadata" if is_result else "callProviderMetadata"] = provider_metadata
            return part
        if dynamic:
            part = {"type": "dynamic-tool", "toolName": tool_name, "toolCallId": tool_call_id, "state": state}
            part["input"] = input
            if not _nullish(input_encoding):
                part["inputEncoding"] = input_encoding
            part["output"] = output
            part["errorText"] = error_text
            part["preliminary"] = preliminary
            part["providerExecuted"] = provider_executed
            part["title"] = title
            if tool_metadata is not UNDEFINED:
                part["toolMetadata"] = tool_metadata
        else:
            part = {"type": f"tool-{tool_name}", "toolCallId": tool_call_id, "state": state, "title": title}
            if tool_metadata is not UNDEFINED:
                part["toolMetadata"] = tool_metadata
            part["input"] = input
            if not _nullish(input_encoding):
                part["inputEncoding"] = input_encoding
            part["output"] = output
            part["rawInput"] = raw_input
            part["errorText"] = error_text
            part["providerExecuted"] = provider_executed
            part["preliminary"] = preliminary
        if not _nullish(provider_metadata):
            part["resultProviderMetadata" if is_result else "callProviderMetadata"] = provider_metadata
        self._parts.append(part)
        return part

    def _missing_part(self, chunk_type: str, chunk_id: Any, kind: str) -> UIMessageStreamError:
        start = f"{kind}-start"
        return UIMessageStreamError(
            f'Received {chunk_type} for missing {kind} part with ID "{chunk_id}". '
            f'Ensure a "{start}" chunk is sent before any "{chunk_type}" chunks.',
            chunk_type=chunk_type,
            chunk_id=str(chunk_id),
        )

    def _apply(self, t: str, chunk: Chunk) -> None:
        handler = self._HANDLERS.get(t)
        if handler is not None:
            handler(self, chunk)
        elif t.startswith("data-"):
            self._apply_data(chunk)
        # Any other type (an unknown ``tool-*`` included) is ignored (rule 16).

    # -- text and reasoning (rules 3 and 4) -------------------------------------

    def _start_part(self, part: dict[str, Any], active: dict[str, dict[str, Any]], chunk: Chunk) -> None:
        part["providerMetadata"] = chunk.get("providerMetadata", UNDEFINED)
        part["state"] = "streaming"
        active[chunk["id"]] = part
        self._parts.append(part)

    def _text_start(self, chunk: Chunk) -> None:
        self._start_part({"type": "text", "text": ""}, self._active_text, chunk)

    def _reasoning_start(self, chunk: Chunk) -> None:
        part = {"type": "reasoning", "id": chunk.get("id", UNDEFINED), "text": ""}
        self._start_part(part, self._active_reasoning, chunk)

    def _active_part(self, t: str, kind: str, active: dict[str, dict[str, Any]], chunk: Chunk) -> dict[str, Any]:
        part = active.get(str(chunk.get("id")))
        if part is None:
            raise self._missing_part(t, chunk.get("id"), kind)
        return part

    def _append_delta(self, t: str, kind: str, active: dict[str, dict[str, Any]], chunk: Chunk) -> None:
        part = self._active_part(t, kind, active, chunk)
        delta = chunk["delta"]
        if not isinstance(delta, str):
            raise UIMessageStreamError(f"{t}: 'delta' must be a string", chunk_type=t, chunk_id=str(chunk.get("id")))
        key = id(part)
        pending = self._pending_text.get(key)
        if pending is None:
            self._pending_text[key] = (part, [part["text"], delta])
        else:
            pending[1].append(delta)
        pm = chunk.get("providerMetadata", UNDEFINED)
        if not _nullish(pm):
            part["providerMetadata"] = pm

    def _text_delta(self, chunk: Chunk) -> None:
        self._append_delta("text-delta", "text", self._active_text, chunk)

    def _reasoning_delta(self, chunk: Chunk) -> None:
        self._append_delta("reasoning-delta", "reasoning", self._active_reasoning, chunk)

    def _text_end(self, chunk: Chunk) -> None:
        part = self._active_part("text-end", "text", self._active_text, chunk)
        part["state"] = "done"
        if not _nullish(chunk.get("citations")):
            part["citations"] = chunk["citations"]
        pm = chunk.get("providerMetadata", UNDEFINED)
        if not _nullish(pm):
            part["providerMetadata"] = pm
        del self._active_text[chunk["id"]]

    def _reasoning_end(self, chunk: Chunk) -> None:
        part = self._active_part("reasoning-end", "reasoning", self._active_reasoning, chunk)
        pm = chunk.get("providerMetadata", UNDEFINED)
        if not _nullish(pm):
            part["providerMetadata"] = pm
        part["state"] = "done"
        del self._active_reasoning[chunk["id"]]

    # -- parts pushed whole (rule 5) ----------------------------------------------

    def _custom(self, chunk: Chunk) -> None:
        get = chunk.get
        self._parts.append(
            {"type": "custom", "kind": get("kind", UNDEFINED), "providerMetadata": get("providerMetadata", UNDEFINED)}
        )

    def _file(self, chunk: Chunk) -> None:
        """``file`` and ``reasoning-file``."""
        get = chunk.get
        part = {"type": chunk["type"], "mediaType": get("mediaType", UNDEFINED), "url": get("url", UNDEFINED)}
        if not _nullish(get("providerMetadata")):
            part["providerMetadata"] = chunk["providerMetadata"]
        self._parts.append(part)

    def _source_url(self, chunk: Chunk) -> None:
        get = chunk.get
        self._parts.append(
            {
                "type": "source-url",
                "sourceId": get("sourceId", UNDEFINED),
                "url": get("url", UNDEFINED),
                "title": get("title", UNDEFINED),
                "providerMetadata": get("providerMetadata", UNDEFINED),
            }
        )

    def _source_document(self, chunk: Chunk) -> None:
        get = chunk.get
        self._parts.append(
            {
                "type": "source-document",
                "sourceId": get("sourceId", UNDEFINED),
                "mediaType": get("mediaType", UNDEFINED),
                "title": get("title", UNDEFINED),
                "filename": get("filename", UNDEFINED),
                "providerMetadata": get("providerMetadata", UNDEFINED),
            }
        )

    def _steering_message(self, chunk: Chunk) -> None:
        self._parts.append(
            {"type": "steering-message", "id": chunk.get("id", UNDEFINED), "parts": chunk.get("parts", UNDEFINED)}
        )

    # -- steps (rule 13) ------------------------------------------------------------

    def _start_step(self, chunk: Chunk) -> None:
        self._parts.append({"type": "step-start"})

    def _finish_step(self, chunk: Chunk) -> None:
        """Nothing in ai@7 (ai@5/6 forget the active text and reasoning ids)."""

    def _reset_step(self, chunk: Chunk) -> None:
        current = self._current_step_parts()
        self._active_text = {}
        self._active_reasoning = {}
        self._partial_calls = {}
        if current:
            del self._parts[len(self._parts) - len(current) :]

    # -- the message's start and end (rules 2, 15, 16) -----------------------------

    def _apply_start(self, chunk: Chunk) -> None:
        message_id = chunk.get("messageId")
        should_reset = (self._reset_on_first_start and self._first_start) or (
            self._reset_on_id_change and message_id is not None and message_id != self._message.get("id")
        )
        self._first_start = False
        if should_reset:
            self._init_state(None, message_id if message_id is not None else self._message.get("id", ""))
            self.finish_reason = None
            self.finished = False
        if message_id is not None:
            self._message["id"] = message_id
        self._update_metadata(chunk.get("messageMetadata", UNDEFINED))

    def _finish(self, chunk: Chunk) -> None:
        self.finished = True
        if not _nullish(chunk.get("finishReason")):
            self.finish_reason = chunk["finishReason"]
        self._update_metadata(chunk.get("messageMetadata", UNDEFINED))

    def _message_metadata(self, chunk: Chunk) -> None:
        self._update_metadata(chunk.get("messageMetadata", UNDEFINED))

    def _error(self, chunk: Chunk) -> None:
        self.error_text = chunk.get("errorText")

    def _abort(self, chunk: Chunk) -> None:
        self.aborted = True
        self.abort_reason = chunk.get("reason")

    def _apply_data(self, chunk: Chunk) -> None:
        # Rule 14.
        if _truthy(chunk.get("transient")):
            if self._on_data is not None:
                self._on_data(chunk)
            return
        existing = None
        chunk_id = chunk.get("id")
        if chunk_id is not None:
            for part in self._parts:
                if part.get("type") == chunk["type"] and part.get("id", UNDEFINED) == chunk_id:
                    existing = part
                    break
        if existing is not None:
            existing["data"] = chunk.get("data", UNDEFINED)
        else:
            # The SDK pushes the chunk object itself, every key included.
            self._parts.append(dict(chunk))
        if self._on_data is not None:
            self._on_data(chunk)

    # -- tool calls (rules 6-12) ------------------------------------------------------

    def _tool_input_start(self, chunk: Chunk) -> None:
        get = chunk.get
        call_id = get("toolCallId")
        self._partial_calls[str(call_id)] = _PartialToolCall(
            text="",
            input_encoding=get("inputEncoding", UNDEFINED),
            tool_name=chunk["toolName"],
            dynamic=get("dynamic", UNDEFINED),
            title=get("title", UNDEFINED),
            tool_metadata=get("toolMetadata", UNDEFINED),
        )
        self._update_tool_part(
            dynamic=_truthy(get("dynamic")),
            tool_call_id=call_id,
            tool_name=chunk["toolName"],
            state="input-streaming",
            input_encoding=get("inputEncoding", UNDEFINED),
            provider_executed=get("providerExecuted", UNDEFINED),
            title=get("title", UNDEFINED),
            tool_metadata=get("toolMetadata", UNDEFINED),
            provider_metadata=get("providerMetadata", UNDEFINED),
        )

    def _tool_input_delta(self, chunk: Chunk) -> None:
        t = "tool-input-delta"
        call_id = chunk.get("toolCallId")
        partial = self._partial_calls.get(str(call_id))
        if partial is None:
            raise UIMessageStreamError(
                f'Received tool-input-delta for missing tool call with ID "{call_id}". '
                'Ensure a "tool-input-start" chunk is sent before any "tool-input-delta" chunks.',
                chunk_type=t,
                chunk_id=str(call_id),
            )
        if not isinstance(chunk["inputTextDelta"], str):
            raise UIMessageStreamError(f"{t}: 'inputTextDelta' must be a string", chunk_type=t, chunk_id=str(call_id))
        partial.text += chunk["inputTextDelta"]
        as_text = partial.input_encoding == "text"
        part = self._update_tool_part(
            dynamic=_truthy(partial.dynamic),
            tool_call_id=call_id,
            tool_name=partial.tool_name,
            state="input-streaming",
            input_encoding=partial.input_encoding,
            # Parsed lazily by _flush; the key keeps its place meanwhile.
            input=partial.text if as_text else UNDEFINED,
            raw_input=partial.text,
            title=partial.title,
            tool_metadata=partial.tool_metadata,
        )
        if as_text:
            self._pending_input.pop(id(part), None)
        else:
            self._pending_input[id(part)] = (part, partial.text)

    def _tool_input_available(self, chunk: Chunk) -> None:
        get = chunk.get
        self._update_tool_part(
            dynamic=_truthy(get("dynamic")),
            tool_call_id=get("toolCallId"),
            tool_name=chunk["toolName"],
            state="input-available",
            input=get("input", UNDEFINED),
            provider_executed=get("providerExecuted", UNDEFINED),
            provider_metadata=get("providerMetadata", UNDEFINED),
            title=get("title", UNDEFINED),
            tool_metadata=get("toolMetadata", UNDEFINED),
        )

    def _tool_input_error(self, chunk: Chunk) -> None:
        get = chunk.get
        call_id = get("toolCallId")
        existing = next((p for p in self._current_step_parts() if _is_tool(p) and p.get("toolCallId") == call_id), None)
        is_dynamic = existing.get("type") == "dynamic-tool" if existing is not None else _truthy(get("dynamic"))
        self._update_tool_part(
            dynamic=is_dynamic,
            tool_call_id=call_id,
            tool_name=chunk["toolName"],
            state="output-error",
            input=get("input", UNDEFINED),
            error_text=get("errorText", UNDEFINED),
            provider_executed=get("providerExecuted", UNDEFINED),
            provider_metadata=get("providerMetadata", UNDEFINED),
            tool_metadata=get("toolMetadata", UNDEFINED),
        )

    def _tool_approval_request(self, chunk: Chunk) -> None:
        get = chunk.get
        part = self._find_tool(get("toolCallId"))
        approval: dict[str, Any] = {"id": chunk["approvalId"]}
        if not _nullish(get("approvalDescriptor")):
            approval["descriptor"] = chunk["approvalDescriptor"]
        if "inputSchemaInput" in chunk:
            approval["inputSchemaInput"] = chunk["inputSchemaInput"]
        if not _nullish(get("reason")):
            approval["requestReason"] = chunk["reason"]
        if get("isAutomatic") is True:
            approval["isAutomatic"] = True
        if not _nullish(get("signature")):
            approval["signature"] = chunk["signature"]
        part["state"] = "approval-requested"
        part["approval"] = approval

    def _tool_approval_response(self, chunk: Chunk) -> None:
        get = chunk.get
        approval_id = get("approvalId")
        found = None
        for candidate in self._parts:
            current = candidate.get("approval") if _is_tool(candidate) else None
            if isinstance(current, dict) and current.get("id") == approval_id:
                found = candidate
                break
        if found is None:
            raise UIMessageStreamError(
                f'No tool invocation found for approval ID "{approval_id}".',
                chunk_type="tool-approval-response",
                chunk_id=str(approval_id),
            )
        previous = found.get("approval")
        approval = dict(previous) if isinstance(previous, dict) else {"id": approval_id}
        found["state"] = "approval-responded"
        approval["id"] = approval_id
        approval["approved"] = get("approved", UNDEFINED)
        if not _nullish(get("reason")):
            approval["reason"] = chunk["reason"]
        found["approval"] = approval
        if not _nullish(get("providerExecuted")):
            found["providerExecuted"] = chunk["providerExecuted"]
        if not _nullish(get("providerMetadata")):
            found["callProviderMetadata"] = chunk["providerMetadata"]

    def _tool_output_denied(self, chunk: Chunk) -> None:
        self._find_tool(chunk.get("toolCallId"))["state"] = "output-denied"

    def _tool_output_fields(self, part: dict[str, Any], chunk: Chunk) -> dict[str, Any]:
        """What both output chunks write into the call's part besides the
        outcome."""
        get = chunk.get
        dynamic = part.get("type") == "dynamic-tool"
        tool_metadata = get("toolMetadata", UNDEFINED)
        if _nullish(tool_metadata):
            tool_metadata = part.get("toolMetadata", UNDEFINED)
        return {
            "dynamic": dynamic,
            "tool_call_id": get("toolCallId"),
            "tool_name": part.get("toolName") if dynamic else _static_tool_name(part),
            "input": part.get("input", UNDEFINED),
            "provider_executed": get("providerExecuted", UNDEFINED),
            "provider_metadata": get("providerMetadata", UNDEFINED),
            "title": part.get("title", UNDEFINED),
            "tool_metadata": tool_metadata,
            "existing": part,
        }

    def _tool_output_available(self, chunk: Chunk) -> None:
        part = self._find_tool(chunk.get("toolCallId"))
        self._update_tool_part(
            state="output-available",
            output=chunk.get("output", UNDEFINED),
            preliminary=chunk.get("preliminary", UNDEFINED),
            **self._tool_output_fields(part, chunk),
        )

    def _tool_output_error(self, chunk: Chunk) -> None:
        part = self._find_tool(chunk.get("toolCallId"))
        raw_input = UNDEFINED if part.get("type") == "dynamic-tool" else part.get("rawInput", UNDEFINED)
        self._update_tool_part(
            state="output-error",
            error_text=chunk.get("errorText", UNDEFINED),
            raw_input=raw_input,
            **self._tool_output_fields(part, chunk),
        )

    #: Chunk type → what it does to the message (``data-*`` aside).
    _HANDLERS: ClassVar[dict[str, Callable[[UIMessageReader, Chunk], None]]] = {
        "text-start": _text_start,
        "text-delta": _text_delta,
        "text-end": _text_end,
        "reasoning-start": _reasoning_start,
        "reasoning-delta": _reasoning_delta,
        "reasoning-end": _reasoning_end,
        "custom": _custom,
        "file": _file,
        "reasoning-file": _file,
        "source-url": _source_url,
        "source-document": _source_document,
        "steering-message": _steering_message,
        "tool-input-start": _tool_input_start,
        "tool-input-delta": _tool_input_delta,
        "tool-input-available": _tool_input_available,
        "tool-input-error": _tool_input_error,
        "tool-approval-request": _tool_approval_request,
        "tool-approval-response": _tool_approval_response,
        "tool-output-denied": _tool_output_denied,
        "tool-output-available": _tool_output_available,
        "tool-output-error": _tool_output_error,
        "start-step": _start_step,
        "finish-step": _finish_step,
        "reset-step": _reset_step,
        "start": _apply_start,
        "finish": _finish,
        "message-metadata": _message_metadata,
        "error": _error,
        "abort": _abort,
    }


def read_ui_message(chunks: Iterable[Chunk], *, message: dict[str, Any] | None = None) -> dict[str, Any]:
    """The message ``chunks`` build (continuing ``message`` when it is an
    assistant message). Raises ``UIMessageStreamError`` on an out-of-order
    chunk."""
    reader = UIMessageReader(message=message)
    reader.feed_all(chunks)
    return reader.message
