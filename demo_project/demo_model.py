"""The demo's offline model and its tools: a chat that works with no network.

``DemoModel`` is deterministic: the same conversation always streams the
same events. It reads the last user message and:

* thinks aloud first (reasoning deltas, word by word), then answers word by
  word;
* asked about the weather ("weather in Paris and Tokyo?") it calls
  ``get_weather(city)`` once per city, in parallel ("temperature" alone
  counts only with a city named: "what's the temperature like" is not a
  weather question);
* asked to compute something ("compute 12 * (3 + 4)") it calls
  ``calculate(expression)`` for each arithmetic expression it finds;
* "count to N" streams the numbers 1 to N, one text delta each ("1",
  " 2", " 3"…), the long stream the disconnect and resume tests use;
* "count to N slowly" counts in steps of 50 numbers with a ``pause`` tool
  call between two steps (six steps for "count to 300 slowly"): the step
  boundaries a steering message is delivered at. A message steered in
  that says "backwards" ("now count backwards") makes the next step count
  down from where the count is, one that says "forwards" up again;
* "email ADDRESS saying TEXT" calls ``send_email(to, body)``, a tool that
  needs a person's approval and only pretends to send; the demo's approval
  policy (``email_policy``) approves an address at ``trusted.test`` and
  denies one at ``blocked.test`` by itself;
* "research TOPIC" calls ``research(topic)``, a tool that streams three
  progress outputs before its final one (an async generator);
* "show a table" answers with a Markdown table of a few cities' made-up
  temperatures (the page renders it as a table);
* "describe the attachment" answers, for each file of the message, "You
  sent NAME (MEDIATYPE, N bytes)." (N the file's real size);
* "roll a die with N sides" calls the MCP tool ``roll_die({"sides": N})``
  of the demo's MCP server (``demo__roll_die``, demo_project/mcp_server.py);
* "change the background to COLOR" calls ``change_background({"color":
  COLOR})``, a tool the page runs, where the endpoint offers it (the AG-UI
  endpoint's ``CHANGE_BACKGROUND``, demo_project/agui.py);
* after tool results it answers from them; anything else gets a short help
  text that quotes the message.

``UISTREAM_DEMO_DELAY_MS`` (read at each call; default 30) is the pause
between two deltas; 0 streams without pausing. ``make_model()`` returns an
``OpenAIChatModel`` (or, with ``OPENAI_API=responses``, an
``OpenAIResponsesModel``) instead when ``OPENAI_MODEL`` (with
``OPENAI_BASE_URL`` / ``OPENAI_API_KEY``) is set: the demo's settings use
it for a compatible server without a key.

The tools: ``get_weather`` returns made-up but stable data for any city;
``calculate`` evaluates arithmetic with a small AST walker (numbers,
``+ - * / // % **`` and parentheses; no names, no calls, no ``eval``;
bounded sizes); ``send_email`` pretends (a person who approves it may
edit its arguments); ``research`` pretends to read three sources.
"""

from __future__ import annotations

import ast
import asyncio
import json
import operator
import os
import re
import zlib
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Sequence
from typing import Any

from uistream_app.protocol.events import (
    Finish,
    ReasoningDelta,
    ReasoningEnd,
    TextDelta,
    ToolCall,
    ToolCallDelta,
    ToolCallStart,
    Usage,
)
from uistream_app.runs import (
    ApprovalStatus,
    AssistantMessage,
    FilePart,
    ModelMessage,
    ModelOptions,
    Tool,
    ToolContext,
    ToolError,
    ToolMessage,
    ToolSpec,
    UserMessage,
    tool,
)
from uistream_app.runs.model import ChatModel, ModelEvent

__all__ = [
    "DEMO_TOOLS",
    "DemoModel",
    "calculate",
    "email_policy",
    "get_weather",
    "make_model",
    "pause",
    "research",
    "safe_eval",
    "send_email",
]

DEFAULT_DELAY_MS = 30
MAX_COUNT = 5000

# -- tools -----------------------------------------------------------------------

_CONDITIONS = ("sunny", "partly cloudy", "cloudy", "light rain", "heavy rain", "windy", "foggy", "snowy")


@tool(run_sync_in_thread=False)
def get_weather(city: str) -> dict[str, Any]:
    """Get the current weather for a city (demo data: made up, but the same
    every time for the same city).

    Args:
        city: The city's name, e.g. "Paris".
    """
    name = " ".join(city.split()).strip(" .?!")
    if not name:
        raise ToolError("Which city? The city name is empty.")
    seed = zlib.crc32(name.lower().encode())
    return {
        "city": name.title(),
        "temperature_c": seed % 36 - 5,
        "conditions": _CONDITIONS[(seed >> 8) % len(_CONDITIONS)],
        "humidity_percent": 25 + (seed >> 16) % 70,
    }


_BINARY: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY: dict[type[ast.unaryop], Callable[[Any], Any]] = {ast.UAdd: operator.pos, ast.USub: operator.neg}
_MAX_BITS = 4096
_MAX_LENGTH = 300


def safe_eval(expression: str) -> int | float:
    """The value of an arithmetic expression, without ``eval``: the text is
    parsed and only number literals, unary ``+ -`` and binary
    ``+ - * / // % **`` are evaluated (``^`` is read as a power, ``×`` and
    ``÷`` as times and divide). Raises ``ToolError`` for anything else, for
    division by zero, and for numbers past 4096 bits."""
    text = expression.strip().replace("^", "**").replace("×", "*").replace("÷", "/")
    if not text:
        raise ToolError("The expression is empty.")
    if len(text) > _MAX_LENGTH:
        raise ToolError(f"The expression is longer than {_MAX_LENGTH} characters.")
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError:
        raise ToolError(f"Cannot read {expression!r} as arithmetic.") from None

    def walk(node: ast.AST) -> int | float:
        if isinstance(node, ast.Constant) and isinstance(node.value, int | float) and not isinstance(node.value, bool):
            return node.value
        if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
            result: int | float = _UNARY[type(node.op)](walk(node.operand))
            return result
        if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
            left, right = walk(node.left), walk(node.right)
            too_big = abs(right) > 10_000 or (
                isinstance(left, int) and abs(left) > 1 and left.bit_length() * abs(right) > _MAX_BITS
            )
            if isinstance(node.op, ast.Pow) and too_big:
                raise ToolError("The result would be too large.")
            try:
                result = _BINARY[type(node.op)](left, right)
            except ZeroDivisionError:
                raise ToolError("Division by zero.") from None
            except OverflowError:
                raise ToolError("The result would be too large.") from None
            if isinstance(result, complex):
                raise ToolError("The result is not a real number.")
            if isinstance(result, int) and result.bit_length() > _MAX_BITS:
                raise ToolError("The result would be too large.")
            return result
        raise ToolError(f"Only numbers and + - * / // % ** are allowed in {expression!r}.")

    value = walk(tree.body)
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return int(value)
    return value


@tool(run_sync_in_thread=False)
def calculate(expression: str) -> dict[str, Any]:
    """Evaluate an arithmetic expression exactly.

    Args:
        expression: Numbers with + - * / // % ** (or ^) and parentheses, e.g. "12 * (3 + 4)".
    """
    return {"expression": expression, "result": safe_eval(expression)}


@tool(requires_approval=True, run_sync_in_thread=False, editable_arguments=True)
def send_email(to: str, body: str) -> dict[str, Any]:
    """Send an email (the demo only pretends to). Needs a person's approval.

    Args:
        to: The recipient's address.
        body: The text of the email.
    """
    if "@" not in to:
        raise ToolError(f"{to!r} is not an email address.")
    return {"status": "sent", "to": to, "characters": len(body), "note": "The demo only pretends to send email."}


#: The three sources ``research`` pretends to read, in order.
RESEARCH_STAGES = ("encyclopedia", "news archive", "journal index")


@tool
async def research(topic: str) -> AsyncGenerator[dict[str, Any], None]:
    """Research a topic (the demo pretends to read three sources), showing
    progress as it goes.

    Args:
        topic: What to research, e.g. "tides".
    """
    subject = " ".join(topic.split()).strip(" .?!")
    if not subject:
        raise ToolError("What should I research? The topic is empty.")
    found = []
    for i, source in enumerate(RESEARCH_STAGES, 1):
        await asyncio.sleep(0)  # a real tool would wait on its sources here
        found.append(f"{source} entry on {subject}")
        yield {"status": "searching", "step": i, "of": len(RESEARCH_STAGES), "source": source}
    # The last value is the call's output (every value before it is progress).
    yield {
        "status": "done",
        "topic": subject,
        "summary": f"{subject.capitalize()}: three sources agree, as far as a demo can tell.",
        "sources": found,
    }


def email_policy(context: ToolContext) -> ApprovalStatus | None:
    """The demo's approval policy (``UISTREAM["TOOL_APPROVAL"]``): an email
    to ``trusted.test`` is approved and one to ``blocked.test`` denied
    without asking anyone; any other address still asks the person (the
    tool's own rule), as does every other tool's call that needs it."""
    if context.tool_name != "send_email":
        return None
    domain = str(context.arguments.get("to", "")).rpartition("@")[2].lower()
    if domain == "trusted.test":
        return ApprovalStatus("approved", "trusted.test is on the demo's list of trusted domains")
    if domain == "blocked.test":
        return ApprovalStatus("denied", "blocked.test is on the demo's list of blocked domains")
    return None


@tool(run_sync_in_thread=False)
def pause() -> dict[str, Any]:
    """Take a breath between two stretches of a slow count: the step
    boundary where a message sent meanwhile reaches the model."""
    return {"paused": True}


DEMO_TOOLS: tuple[Tool, ...] = (get_weather, calculate, send_email, research, pause)


# -- the model -------------------------------------------------------------------

_COUNT = re.compile(r"\bcount(?:\s+(?:from\s+1\s+))?\s+(?:up\s+)?to\s+(\d+)", re.I)
_SLOW_COUNT = re.compile(r"\bcount(?:\s+(?:from\s+1\s+))?\s+(?:up\s+)?to\s+(\d+)\s+slowly\b", re.I)
_BACKWARDS = re.compile(r"\bbackwards?\b|\bcount\s+down\b", re.I)
_FORWARDS = re.compile(r"\bforwards?\b|\bcount\s+up\b", re.I)
#: Numbers per step of a slow count.
SLOW_STEP = 50
_ROLL = re.compile(r"\broll\s+(?:a|one)\s+(?:die|dice)\s+with\s+(\d+)\s+sides?\b", re.I)
_EMAIL = re.compile(r"\bemail\s+(\S+@\S+?)[,:]?\s+saying\s+(.+)", re.I | re.S)
_RESEARCH = re.compile(r"^\s*research\s+(.+)", re.I | re.S)
_BACKGROUND = re.compile(r"\b(?:change|set|make)\s+the\s+background(?:\s+colou?r)?\s+(?:to\s+)?(#?\w+)", re.I)
_WEATHER = re.compile(r"\b(?:weather|forecast)\b", re.I)
_TEMPERATURE = re.compile(r"\btemperatures?\b", re.I)
_TABLE = re.compile(r"\bshow\s+(?:me\s+)?a\s+table\b", re.I)
_TABLE_CITIES = ("Paris", "Rome", "Tokyo", "Nairobi")
_CITY = re.compile(r"\b(?:in|for)\s+([^?.!;:\n]+)", re.I)
_CITY_LIST = re.compile(r"\s*(?:,|\band\b|\bor\b|&)\s*", re.I)
# Words that end a city name ("weather in Paris today", "in Rome and compute…").
_NOT_CITY_WORDS = (
    "today tomorrow tonight now right please then also compute calculate evaluate what what's whats how is "
    "are will count email tell me and or this week weekend"
)
_NOT_CITY = frozenset(_NOT_CITY_WORDS.split())
_EXPRESSION = re.compile(r"[-+(]*\s*\d[\d\s.+\-*/%^×÷()]*")
_OPERATOR = re.compile(r"\d\s*(?:\*\*|//|[-+*/%^×÷])\s*[-+(]*\s*\d")


def _words(text: str) -> list[str]:
    """Deltas of one word each, the space kept in front of the word."""
    pieces = text.split(" ")
    return [p if i == 0 else " " + p for i, p in enumerate(pieces) if p or i == 0]


def _fragments(text: str, count: int = 3) -> list[str]:
    size = max(1, -(-len(text) // count))
    return [text[i : i + size] for i in range(0, len(text), size)]


def _expressions(prompt: str) -> list[str]:
    found = []
    for match in _EXPRESSION.finditer(prompt):
        candidate = match.group(0).strip().rstrip("=?.")
        if candidate.count("(") != candidate.count(")"):
            candidate = candidate.strip("()") if candidate.count("(") + candidate.count(")") == 1 else candidate
        if _OPERATOR.search(candidate):
            found.append(candidate.strip())
    return found


def _cities(prompt: str) -> list[str]:
    """The cities after "in"/"for": "in Paris, Rome and New York today"."""
    cities: list[str] = []
    for match in _CITY.finditer(prompt):
        for piece in _CITY_LIST.split(match.group(1)):
            words: list[str] = []
            for word in piece.split():
                if word.lower() in _NOT_CITY or any(c.isdigit() for c in word):
                    break
                words.append(word)
            if words and " ".join(words) not in cities:
                cities.append(" ".join(words))
            if len(words) < len(piece.split()) or not words:
                break
    return cities


def _describe(file: FilePart) -> str:
    """ "describe the attachment": what the model knows of one file (its
    size from storage, or counted from the bytes it was sent)."""
    size = file.size if file.size is not None else len(file.data() or b"")
    return f"You sent {file.filename or 'a file'} ({file.media_type}, {size} bytes)."


class DemoModel:
    """The deterministic offline model (see the module docstring)."""

    name = "uistream-demo"

    def __init__(self, delay_ms: float | None = None) -> None:
        self.delay_ms = delay_ms

    def delay(self) -> float:
        """Seconds between two deltas: the constructor's value, else
        ``UISTREAM_DEMO_DELAY_MS``, else 30 ms."""
        if self.delay_ms is not None:
            return max(0.0, self.delay_ms / 1000)
        raw = os.environ.get("UISTREAM_DEMO_DELAY_MS", "")
        try:
            return max(0.0, float(raw) / 1000) if raw.strip() else DEFAULT_DELAY_MS / 1000
        except ValueError:
            return DEFAULT_DELAY_MS / 1000

    async def stream(
        self,
        messages: Sequence[ModelMessage],
        tools: Sequence[ToolSpec] = (),
        options: ModelOptions | None = None,
    ) -> AsyncIterator[ModelEvent]:
        delay = self.delay()
        output = 0
        events = self.plan(messages, tools)
        called = any(isinstance(e, ToolCall) for e in events)
        for event in events:
            if delay and isinstance(event, TextDelta | ReasoningDelta | ToolCallDelta):
                await asyncio.sleep(delay)
            output += isinstance(event, TextDelta | ReasoningDelta)
            yield event
        prompt_words = sum(len(getattr(m, "content", "").split()) for m in messages)
        yield Usage(input_tokens=prompt_words, output_tokens=output)
        yield Finish("tool-calls" if called else "stop")

    # -- planning: what to say, as events (no I/O, no waiting) ---------------------

    def plan(self, messages: Sequence[ModelMessage], tools: Sequence[ToolSpec]) -> list[ModelEvent]:
        """The events of the answer to ``messages``, before pacing."""
        last_user = max((i for i, m in enumerate(messages) if isinstance(m, UserMessage)), default=-1)
        prompt = messages[last_user].content if last_user >= 0 else ""
        tail = messages[last_user + 1 :]
        slow = self._slow_count(messages, tools)
        if slow is not None:
            return slow
        if any(isinstance(m, ToolMessage) for m in tail):
            return self._answer_results(tail)
        available = {t.name for t in tools}
        prior_calls = sum(len(m.tool_calls) for m in messages if isinstance(m, AssistantMessage))

        count = _COUNT.search(prompt)
        if count:
            n = min(int(count.group(1)), MAX_COUNT)
            think = f"The user wants me to count to {n}. I will say each number in turn."
            numbers = [str(i) if i == 1 else f" {i}" for i in range(1, n + 1)]
            return self._think(think) + [TextDelta(x) for x in numbers]

        if _TABLE.search(prompt):
            rows = "".join(f"| {c} | {get_weather(c)['temperature_c']} °C |\n" for c in _TABLE_CITIES)
            think = "The user wants a table. I will write one in Markdown: a city and its temperature per row."
            return self._think(think) + self._say(
                "Today's made-up temperatures:\n\n| city | temperature |\n| --- | --- |\n" + rows
            )
        if "describe the attachment" in prompt.lower():
            asked = messages[last_user]
            files = asked.files if isinstance(asked, UserMessage) else ()
            return self._think("The user asks about the files they attached. I will name each one.") + self._say(
                " ".join(_describe(f) for f in files) or "There is no attachment in your message."
            )

        calls: list[tuple[str, dict[str, Any]]] = []
        reasons: list[str] = []
        email = _EMAIL.search(prompt)
        research_topic = _RESEARCH.match(prompt)
        if research_topic and not email:
            topic = research_topic.group(1).strip().rstrip("?.!")
            calls.append(("research", {"topic": topic}))
            reasons.append(f"The user wants research on {topic}. I will call research and wait for its findings.")
        roll = _ROLL.search(prompt)
        if roll:
            # An MCP server's tool: namespaced by its server (demo__roll_die).
            die = next((n for n in sorted(available) if n == "roll_die" or n.endswith("__roll_die")), "roll_die")
            calls.append((die, {"sides": int(roll.group(1))}))
            reasons.append(f"The user wants a die with {roll.group(1)} sides rolled. I will call {die}.")
        elif email:
            to, body = email.group(1), email.group(2).strip()
            calls.append(("send_email", {"to": to, "body": body}))
            reasons.append(f"The user wants an email sent to {to}. I will call send_email; a person must approve it.")
        elif background := _BACKGROUND.search(prompt):
            color = background.group(1).lower()
            calls.append(("change_background", {"color": color}))
            reasons.append(f"The user wants a {color} background. I will call change_background; the page runs it.")
        else:
            cities = _cities(prompt)
            if _WEATHER.search(prompt) or (_TEMPERATURE.search(prompt) and cities):
                if not cities:
                    think = "The user asks about the weather but names no city. I should ask which one."
                    return self._think(think) + self._say("Which city would you like the weather for?")
                for city in cities:
                    calls.append(("get_weather", {"city": city}))
                reasons.append(f"The user asks about the weather in {', '.join(cities)}. I will call get_weather.")
            for expression in _expressions(prompt):
                calls.append(("calculate", {"expression": expression}))
                reasons.append(f"There is arithmetic to do: {expression}. I will call calculate rather than guess.")

        missing = sorted({name for name, _ in calls if name not in available})
        if missing:
            think = f"I would call {', '.join(missing)}, but no such tool is available in this chat."
            return self._think(think) + self._say(
                f"I can't do that here: the {', '.join(missing)} tool is not available."
            )
        if calls:
            events = self._think(" ".join(reasons))
            for i, (name, arguments) in enumerate(calls):
                call_id = f"call_{prior_calls + i}"
                raw = json.dumps(arguments, ensure_ascii=False)
                events.append(ToolCallStart(call_id, name))
                events.extend(ToolCallDelta(call_id, piece) for piece in _fragments(raw))
                events.append(ToolCall(call_id, name, raw))
            return events

        think = "This is not something my offline rules cover. I will say what I can do."
        answer = (
            "I'm the offline demo model, so I follow a few simple rules. I can tell you the weather "
            '("What\'s the weather in Paris?"), do arithmetic ("compute 12 * (3 + 4)"), count ("count to 20") '
            'send a pretend email ("email ada@example.com saying hello") or research a topic ("research tides"). '
            'You said: "' + prompt.strip() + '"'
        )
        return self._think(think) + self._say(answer)

    def _slow_count(self, messages: Sequence[ModelMessage], tools: Sequence[ToolSpec]) -> list[ModelEvent] | None:
        """The next step of a slow count ("count to N slowly"), or None when
        the conversation is not in one: the last user message asked for it,
        or every user message since says which way to count (steered in)."""
        start = -1
        backwards = False
        for i in range(len(messages) - 1, -1, -1):
            message = messages[i]
            if not isinstance(message, UserMessage):
                continue
            if _SLOW_COUNT.search(message.content):
                start = i
                break
            if not (_BACKWARDS.search(message.content) or _FORWARDS.search(message.content)):
                return None
        if start < 0:
            return None
        target = min(int(_SLOW_COUNT.search(messages[start].content).group(1)), MAX_COUNT)  # type: ignore[union-attr]
        said = re.findall(r"\d+", "".join(m.content for m in messages[start:] if isinstance(m, AssistantMessage)))
        last = int(said[-1]) if said else 0
        think: list[ModelEvent] = []
        for message in messages[start + 1 :]:
            if isinstance(message, UserMessage):
                backwards = bool(_BACKWARDS.search(message.content))
        if isinstance(messages[-1], UserMessage) and len(messages) - 1 != start:
            way = "down" if backwards else "up"
            think = self._think(f"The user wants me to count {way} now. I go on from {last}, {way}.")
        elif not said:
            think = self._think(f"The user wants me to count to {target} slowly: {SLOW_STEP} numbers, then a pause.")
        if backwards:
            numbers = list(range(last - 1, max(last - SLOW_STEP, 1) - 1, -1))
            done = not numbers or numbers[-1] <= 1
        else:
            numbers = list(range(last + 1, min(last + SLOW_STEP, target) + 1))
            done = not numbers or numbers[-1] >= target
        events = think + [TextDelta(str(x) if i == 0 else f" {x}") for i, x in enumerate(numbers)]
        if not numbers:
            events += self._say("Done counting.")
        if not done and any(t.name == "pause" for t in tools):
            call_id = f"call_{sum(len(m.tool_calls) for m in messages if isinstance(m, AssistantMessage))}"
            events += [ToolCallStart(call_id, "pause"), ToolCallDelta(call_id, "{}"), ToolCall(call_id, "pause", "{}")]
        return events

    def _answer_results(self, tail: Sequence[ModelMessage]) -> list[ModelEvent]:
        names: dict[str, str] = {}
        for message in tail:
            if isinstance(message, AssistantMessage):
                names.update({c.id: c.name for c in message.tool_calls})
        sentences = []
        for message in tail:
            if not isinstance(message, ToolMessage):
                continue
            name = message.tool_name or names.get(message.tool_call_id, "the tool")
            sentences.append(self._sentence(name, message))
        think = "I have the tool results. Let me put them into words."
        return self._think(think) + self._say(" ".join(sentences))

    @staticmethod
    def _sentence(name: str, message: ToolMessage) -> str:
        if message.is_error:
            if message.content.startswith(("The user denied", "The tool call was denied")):
                return f"I did not run {name}: {message.content}"
            return f"The {name} tool failed: {message.content}"
        try:
            data = json.loads(message.content)
        except ValueError:
            data = message.content
        if name == "get_weather" and isinstance(data, dict):
            return (
                f"In {data.get('city')} it is {data.get('temperature_c')}°C and {data.get('conditions')}, "
                f"with {data.get('humidity_percent')}% humidity."
            )
        if name == "calculate" and isinstance(data, dict):
            return f"{data.get('expression')} = {data.get('result')}."
        if name.endswith("roll_die"):
            value = data.get("result") if isinstance(data, dict) else data
            return f"You rolled a {value}."
        if name == "change_background" and isinstance(data, dict):
            return f"The background is {data.get('color')} now."
        if name == "send_email" and isinstance(data, dict):
            return f"Done: the email to {data.get('to')} is sent (only pretend: this is the demo)."
        if name == "research" and isinstance(data, dict):
            sources = ", ".join(str(s) for s in data.get("sources") or [])
            return f"Research finished. {data.get('summary')} (Sources: {sources}.)"
        return f"{name} returned {message.content}."

    @staticmethod
    def _think(text: str) -> list[ModelEvent]:
        out: list[ModelEvent] = [ReasoningDelta(w) for w in _words(text)]
        out.append(ReasoningEnd())
        return out

    @staticmethod
    def _say(text: str) -> list[ModelEvent]:
        return [TextDelta(w) for w in _words(text)]


def make_model() -> ChatModel:
    """The demo's model: when ``OPENAI_MODEL`` is set, an
    ``OpenAIChatModel`` (or an ``OpenAIResponsesModel`` with
    ``OPENAI_API=responses``) at ``OPENAI_BASE_URL`` (default OpenAI's),
    with ``OPENAI_API_KEY`` if any (a local compatible server needs none);
    else ``DemoModel``."""
    model = os.environ.get("OPENAI_MODEL")
    if model:
        from uistream_app.runs.openai import OpenAIChatModel, OpenAIResponsesModel

        responses = os.environ.get("OPENAI_API", "chat").strip().lower() == "responses"
        factory = OpenAIResponsesModel if responses else OpenAIChatModel
        return factory(
            model,
            base_url=os.environ.get("OPENAI_BASE_URL") or "https://api.openai.com/v1",
            api_key=os.environ.get("OPENAI_API_KEY") or None,
        )
    return DemoModel()
