"""``UIMessageReader``: UI message chunks in, the assistant ``UIMessage`` out.

The Python twin of ai@7.0.173's ``processUIMessageStream``
(``src/ui/process-ui-message-stream.ts``), which both ``useChat`` and
``readUIMessageStream`` run. It builds the stored message from the canonical
log, so what is stored is what the browser built: the message is a plain JSON
object exactly as the SDK's would serialise with ``JSON.stringify`` (a field
the SDK leaves ``undefined`` is absent, key order included). No I/O, no
Django.

The rules, in the order of the SDK's ``switch``:

1. State. A reader starts from a fresh message ``{id, role: "assistant",
   parts: []}`` (``id`` is ``message_id``, default ``""``) or, when given an
   assistant ``message=``, continues that message (the SDK's ``lastMessage``:
   new parts are appended to it; the caller's dict is copied, not mutated).
   Tool parts after the message's last ``step-start`` that are still
   ``input-streaming`` resume their input from their ``rawInput``.
2. ``start``: a ``messageId`` replaces the message id; ``messageMetadata`` is
   merged (rule 17). With ``reset_on_message_id_change`` a *different* id
   starts a fresh message instead, and with ``reset_on_first_start`` the first
   ``start`` does (the SDK's ``resetStateOn…`` flags: ``readUIMessageStream``
   sets the first, ``useChat`` sets the first when resuming and the second
   too when its transport replays from the beginning).
3. ``text-start`` pushes ``{type: "text", text: "", providerMetadata,
   state: "streaming"}`` and makes it the active text part of its id (a
   second start with the same id leaves the first part streaming for good).
   ``text-delta`` appends to the active part; ``text-end`` sets ``state:
   "done"``, stores ``citations`` when given and forgets the id. Delta and end
   replace ``providerMetadata`` when they carry one. A delta or end for an id
   that is not active raises.
4. ``reasoning-*``: as rule 3, with ``{type: "reasoning", id, text,
   providerMetadata, state}`` (ai@7 keeps the chunk id on the part) and no
   citations.
5. ``custom``, ``file``, ``reasoning-file``, ``source-url``,
   ``source-document`` and ``steering-message`` each push one part built from
   the chunk's fields (``file`` and ``reasoning-file`` only carry a
   ``providerMetadata`` that is not null).
6. ``tool-input-start`` remembers a partial call (name, dynamic, title,
   toolMetadata, inputEncoding) and sets the tool part ``input-streaming``:
   ``tool-NAME``, or ``dynamic-tool`` with ``toolName`` when ``dynamic``.
   "Sets" means: update the part of that ``toolCallId`` in the current step
   (after the last ``step-start``; static parts and dynamic parts are looked
   up separately), or push a new one.
7. ``tool-input-delta`` appends to the partial call's text (``rawInput``) and
   sets ``input`` to that text parsed as partial JSON (``parse_partial_json``,
   the SDK's ``parsePartialJson`` + ``fixJson``), or to the text itself for
   ``inputEncoding: "text"``. A delta for a call never started raises.
8. ``tool-input-available`` sets the part ``input-available`` with the
   complete ``input``; ``tool-input-error`` sets it ``output-error`` with
   ``input`` and ``errorText`` (keeping a dynamic part dynamic). Neither ends
   the partial call: a later delta would stream it again, as in the SDK.
9. ``tool-output-available`` / ``tool-output-error`` / ``tool-output-denied``
   find the call (rule 10) and set ``output-available`` (``output``,
   ``preliminary``), ``output-error`` (``errorText``) or ``output-denied``.
10. A call is found first in the current step, else as the last tool part
    with that ``toolCallId`` anywhere in the message; none raises "No tool
    invocation found for tool call ID".
11. ``tool-approval-request`` sets ``approval-requested`` and ``approval =
    {id, descriptor?, inputSchemaInput?, requestReason?, isAutomatic?,
    signature?}``. ``tool-approval-response`` finds the part by approval id
    anywhere in the message (none raises), sets ``approval-responded`` and
    adds ``approved`` and ``reason`` to the approval.
12. Tool provider metadata: a chunk's ``providerMetadata`` becomes
    ``resultProviderMetadata`` on the output states and
    ``callProviderMetadata`` otherwise. ``providerExecuted`` once set stays
    unless a chunk says otherwise. ``title`` and ``toolMetadata`` change only
    when a chunk carries them. ``output``, ``errorText``, ``rawInput`` and
    ``preliminary`` are rewritten (usually cleared) on every state change.
13. ``start-step`` pushes ``{type: "step-start"}``; ``finish-step`` does
    nothing in ai@7 (ai@5/6 forget the active text and reasoning ids there).
    ``reset-step`` removes every part after the last ``step-start`` (the
    ``step-start`` itself stays) and forgets all active text, reasoning and
    partial tool calls.
14. ``data-NAME``: a transient chunk goes to ``on_data`` only. Otherwise a
    chunk with an ``id`` whose type and id match an existing part anywhere in
    the message replaces that part's ``data`` in place; else the chunk itself
    (every key it has) is pushed as a part. ``on_data`` receives every data
    chunk, transient or not, as in the SDK.
15. ``finish`` keeps its ``finishReason`` (``finish_reason``) and merges its
    ``messageMetadata``; ``message-metadata`` merges.
16. ``error`` records ``errorText`` in ``error_text`` and keeps the partial
    message. ``useChat`` stops reading at an error chunk (its ``onError``
    throws); ``readUIMessageStream`` reads on. The reader reads on unless
    ``stop_on_error`` is set, when later chunks are ignored. ``abort``
    records ``aborted``/``abort_reason`` and changes nothing else (the SDK's
    reader ignores it). Any other type that is not ``data-*`` is ignored.
17. Metadata merges with the SDK's ``mergeObjects``: objects merge deeply,
    arrays and other values (``null`` included) replace, and
    ``__proto__``/``constructor``/``prototype`` keys are skipped. A chunk
    whose ``messageMetadata`` is ``null`` changes nothing.
18. An out-of-order chunk raises ``UIMessageStreamError`` with the SDK's
    message, ``chunk_type`` and ``chunk_id``; so does a chunk that is not an
    object with a string ``type``, lacks a field the reader needs, or has a
    delta that is not a string. With ``validate=True`` every chunk is first
    checked against the ai@7 schema (``chunks.validate_chunk``), as the SDK's
    transports do before ``processUIMessageStream`` sees it; off by default,
    so that ai@5/6 renderings (``finishReason: "unknown"``) read too. After
    any of these, the reader refuses every further chunk; ``message`` still
    shows what was built.

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
from typing import Any, Final, NoReturn

from .chunks import Chunk, validate_chunk

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


def fix_json(text: str) -> str:
    """The SDK's ``fixJson`` (``src/util/fix-json.ts``): cut a JSON prefix back
    to its last complete token and close what is open. Invalid JSON is not
    repaired, only truncated JSON."""
    stack = ["ROOT"]
    last_valid = -1
    literal_start = 0
    unicode_digits = 0

    def value_start(char: str, i: int, swap: str) -> None:
        nonlocal last_valid, literal_start
        if char == '"':
            last_valid = i
            stack[-1] = swap
            stack.append("STRING")
        elif char in "ftn":
            last_valid = i
            literal_start = i
            stack[-1] = swap
            stack.append("LITERAL")
        elif char == "-":
            stack[-1] = swap
            stack.append("NUMBER")
        elif "0" <= char <= "9":
            last_valid = i
            stack[-1] = swap
            stack.append("NUMBER")
        elif char == "{":
            last_valid = i
            stack[-1] = swap
            stack.append("OBJECT_START")
        elif char == "[":
            last_valid = i
            stack[-1] = swap
            stack.append("ARRAY_START")

    def after_object_value(char: str, i: int) -> None:
        nonlocal last_valid
        if char == ",":
            stack[-1] = "OBJECT_AFTER_COMMA"
        elif char == "}":
            last_valid = i
            stack.pop()

    def after_array_value(char: str, i: int) -> None:
        nonlocal last_valid
        if char == ",":
            stack[-1] = "ARRAY_AFTER_COMMA"
        elif char == "]":
            last_valid = i
            stack.pop()

    for i, char in enumerate(text):
        state = stack[-1] if stack else None
        if state == "ROOT":
            value_start(char, i, "FINISH")
        elif state == "OBJECT_START":
            if char == '"':
                stack[-1] = "OBJECT_KEY"
            elif char == "}":
                last_valid = i
                stack.pop()
        elif state == "OBJECT_AFTER_COMMA":
            if char == '"':
                stack[-1] = "OBJECT_KEY"
        elif state == "OBJECT_KEY":
            if char == '"':
                stack[-1] = "OBJECT_AFTER_KEY"
        elif state == "OBJECT_AFTER_KEY":
            if char == ":":
                stack[-1] = "OBJECT_BEFORE_VALUE"
        elif state == "OBJECT_BEFORE_VALUE":
            value_start(char, i, "OBJECT_AFTER_VALUE")
        elif state == "OBJECT_AFTER_VALUE":
            after_object_value(char, i)
        elif state == "STRING":
            if char == '"':
                stack.pop()
                last_valid = i
            elif char == "\\":
                stack.append("STRING_ESCAPE")
            else:
                last_valid = i
        elif state == "ARRAY_START":
            if char == "]":
                last_valid = i
                stack.pop()
            else:
                value_start(char, i, "ARRAY_AFTER_VALUE")
        elif state == "ARRAY_AFTER_VALUE":
            if char == ",":
                stack[-1] = "ARRAY_AFTER_COMMA"
            elif char == "]":
                last_valid = i
                stack.pop()
            else:
                last_valid = i
        elif state == "ARRAY_AFTER_COMMA":
            value_start(char, i, "ARRAY_AFTER_VALUE")
        elif state == "STRING_ESCAPE":
            stack.pop()
            if char == "u":
                unicode_digits = 0
                stack.append("STRING_UNICODE_ESCAPE")
            else:
                last_valid = i
        elif state == "STRING_UNICODE_ESCAPE":
            if char in "0123456789abcdefABCDEF":
                unicode_digits += 1
                if unicode_digits == 4:
                    stack.pop()
                    last_valid = i
        elif state == "NUMBER":
            if "0" <= char <= "9":
                last_valid = i
            elif char in "eE-.":
                pass
            elif char == ",":
                stack.pop()
                if stack and stack[-1] == "ARRAY_AFTER_VALUE":
                    after_array_value(char, i)
                if stack and stack[-1] == "OBJECT_AFTER_VALUE":
                    after_object_value(char, i)
            elif char == "}":
                stack.pop()
                if stack and stack[-1] == "OBJECT_AFTER_VALUE":
                    after_object_value(char, i)
            elif char == "]":
                stack.pop()
                if stack and stack[-1] == "ARRAY_AFTER_VALUE":
                    after_array_value(char, i)
            else:
                stack.pop()
        elif state == "LITERAL":
            partial = text[literal_start : i + 1]
            if not ("false".startswith(partial) or "true".startswith(partial) or "null".startswith(partial)):
                stack.pop()
                if stack and stack[-1] == "OBJECT_AFTER_VALUE":
                    after_object_value(char, i)
                elif stack and stack[-1] == "ARRAY_AFTER_VALUE":
                    after_array_value(char, i)
            else:
                last_valid = i

    result = text[: last_valid + 1]
    for state in reversed(stack):
        if state == "STRING":
            result += '"'
        elif state.startswith("OBJECT"):
            result += "}"
        elif state.startswith("ARRAY"):
            result += "]"
        elif state == "LITERAL":
            partial = text[literal_start:]
            for word in ("true", "false", "null"):
                if word.startswith(partial):
                    result += word[len(partial) :]
                    break
    return result


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


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _secure_loads(text: str) -> Any:
    value = json.loads(text, parse_constant=_reject_constant)
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
    return _is_static_tool(part) or part.get("type") == "dynamic-tool"


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
        get = chunk.get
        if t in ("text-start", "reasoning-start"):
            # Rules 3 and 4.
            if t == "text-start":
                part: dict[str, Any] = {"type": "text", "text": ""}
                active = self._active_text
            else:
                part = {"type": "reasoning", "id": get("id", UNDEFINED), "text": ""}
                active = self._active_reasoning
            part["providerMetadata"] = get("providerMetadata", UNDEFINED)
            part["state"] = "streaming"
            active[chunk["id"]] = part
            self._parts.append(part)
        elif t in ("text-delta", "reasoning-delta"):
            kind = "text" if t == "text-delta" else "reasoning"
            part_or_none = (self._active_text if kind == "text" else self._active_reasoning).get(str(get("id")))
            if part_or_none is None:
                raise self._missing_part(t, get("id"), kind)
            if not isinstance(chunk["delta"], str):
                raise UIMessageStreamError(f"{t}: 'delta' must be a string", chunk_type=t, chunk_id=str(get("id")))
            key = id(part_or_none)
            pending = self._pending_text.get(key)
            if pending is None:
                self._pending_text[key] = (part_or_none, [part_or_none["text"], chunk["delta"]])
            else:
                pending[1].append(chunk["delta"])
            pm = get("providerMetadata", UNDEFINED)
            if not _nullish(pm):
                part_or_none["providerMetadata"] = pm
        elif t in ("text-end", "reasoning-end"):
            kind = "text" if t == "text-end" else "reasoning"
            active = self._active_text if kind == "text" else self._active_reasoning
            part_or_none = active.get(str(get("id")))
            if part_or_none is None:
                raise self._missing_part(t, get("id"), kind)
            if kind == "text":
                part_or_none["state"] = "done"
                if not _nullish(get("citations")):
                    part_or_none["citations"] = chunk["citations"]
                pm = get("providerMetadata", UNDEFINED)
                if not _nullish(pm):
                    part_or_none["providerMetadata"] = pm
            else:
                pm = get("providerMetadata", UNDEFINED)
                if not _nullish(pm):
                    part_or_none["providerMetadata"] = pm
                part_or_none["state"] = "done"
            del active[chunk["id"]]
        elif t == "custom":
            self._parts.append(
                {
                    "type": "custom",
                    "kind": get("kind", UNDEFINED),
                    "providerMetadata": get("providerMetadata", UNDEFINED),
                }
            )
        elif t in ("file", "reasoning-file"):
            part = {"type": t, "mediaType": get("mediaType", UNDEFINED), "url": get("url", UNDEFINED)}
            if not _nullish(get("providerMetadata")):
                part["providerMetadata"] = chunk["providerMetadata"]
            self._parts.append(part)
        elif t == "source-url":
            self._parts.append(
                {
                    "type": t,
                    "sourceId": get("sourceId", UNDEFINED),
                    "url": get("url", UNDEFINED),
                    "title": get("title", UNDEFINED),
                    "providerMetadata": get("providerMetadata", UNDEFINED),
                }
            )
        elif t == "source-document":
            self._parts.append(
                {
                    "type": t,
                    "sourceId": get("sourceId", UNDEFINED),
                    "mediaType": get("mediaType", UNDEFINED),
                    "title": get("title", UNDEFINED),
                    "filename": get("filename", UNDEFINED),
                    "providerMetadata": get("providerMetadata", UNDEFINED),
                }
            )
        elif t == "steering-message":
            self._parts.append({"type": t, "id": get("id", UNDEFINED), "parts": get("parts", UNDEFINED)})
        elif t.startswith("tool-"):
            self._apply_tool(t, chunk)
        elif t == "start-step":
            self._parts.append({"type": "step-start"})
        elif t == "finish-step":
            pass
        elif t == "reset-step":
            current = self._current_step_parts()
            self._active_text = {}
            self._active_reasoning = {}
            self._partial_calls = {}
            if current:
                del self._parts[len(self._parts) - len(current) :]
        elif t == "start":
            self._apply_start(chunk)
        elif t == "finish":
            self.finished = True
            if not _nullish(get("finishReason")):
                self.finish_reason = chunk["finishReason"]
            self._update_metadata(get("messageMetadata", UNDEFINED))
        elif t == "message-metadata":
            self._update_metadata(get("messageMetadata", UNDEFINED))
        elif t == "error":
            self.error_text = get("errorText")
        elif t == "abort":
            self.aborted = True
            self.abort_reason = get("reason")
        elif t.startswith("data-"):
            self._apply_data(chunk)

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

    def _apply_tool(self, t: str, chunk: Chunk) -> None:
        get = chunk.get
        call_id = get("toolCallId")
        if t == "tool-input-start":
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
        elif t == "tool-input-delta":
            partial = self._partial_calls.get(str(call_id))
            if partial is None:
                raise UIMessageStreamError(
                    f'Received tool-input-delta for missing tool call with ID "{call_id}". '
                    'Ensure a "tool-input-start" chunk is sent before any "tool-input-delta" chunks.',
                    chunk_type=t,
                    chunk_id=str(call_id),
                )
            if not isinstance(chunk["inputTextDelta"], str):
                raise UIMessageStreamError(
                    f"{t}: 'inputTextDelta' must be a string", chunk_type=t, chunk_id=str(call_id)
                )
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
        elif t == "tool-input-available":
            self._update_tool_part(
                dynamic=_truthy(get("dynamic")),
                tool_call_id=call_id,
                tool_name=chunk["toolName"],
                state="input-available",
                input=get("input", UNDEFINED),
                provider_executed=get("providerExecuted", UNDEFINED),
                provider_metadata=get("providerMetadata", UNDEFINED),
                title=get("title", UNDEFINED),
                tool_metadata=get("toolMetadata", UNDEFINED),
            )
        elif t == "tool-input-error":
            existing = next(
                (p for p in self._current_step_parts() if _is_tool(p) and p.get("toolCallId") == call_id), None
            )
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
        elif t == "tool-approval-request":
            part = self._find_tool(call_id)
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
        elif t == "tool-approval-response":
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
                    chunk_type=t,
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
        elif t == "tool-output-denied":
            self._find_tool(call_id)["state"] = "output-denied"
        elif t in ("tool-output-available", "tool-output-error"):
            part = self._find_tool(call_id)
            dynamic = part.get("type") == "dynamic-tool"
            tool_metadata = get("toolMetadata", UNDEFINED)
            if _nullish(tool_metadata):
                tool_metadata = part.get("toolMetadata", UNDEFINED)
            common: dict[str, Any] = {
                "dynamic": dynamic,
                "tool_call_id": call_id,
                "tool_name": part.get("toolName") if dynamic else _static_tool_name(part),
                "input": part.get("input", UNDEFINED),
                "provider_executed": get("providerExecuted", UNDEFINED),
                "provider_metadata": get("providerMetadata", UNDEFINED),
                "title": part.get("title", UNDEFINED),
                "tool_metadata": tool_metadata,
                "existing": part,
            }
            if t == "tool-output-available":
                self._update_tool_part(
                    state="output-available",
                    output=get("output", UNDEFINED),
                    preliminary=get("preliminary", UNDEFINED),
                    **common,
                )
            else:
                raw_input = UNDEFINED if dynamic else part.get("rawInput", UNDEFINED)
                self._update_tool_part(
                    state="output-error", error_text=get("errorText", UNDEFINED), raw_input=raw_input, **common
                )


def read_ui_message(chunks: Iterable[Chunk], *, message: dict[str, Any] | None = None) -> dict[str, Any]:
    """The message ``chunks`` build (continuing ``message`` when it is an
    assistant message). Raises ``UIMessageStreamError`` on an out-of-order
    chunk."""
    reader = UIMessageReader(message=message)
    reader.feed_all(chunks)
    return reader.message
