"""What the demo's framework agents say, framework-free: each agent's
offline test model asks ``reply()`` and speaks the answer in its
framework's own stream (pydantic-ai parts, LangChain message chunks,
Responses events), so the three chats behave alike and like the demo
model's:

* "count to N" streams 1..N, one text delta each ("1", " 2"…);
* "weather in CITY" calls ``get_weather({"city": CITY})``, then answers
  from its output, naming the city;
* "email ADDRESS saying TEXT" calls ``send_email({"to": ADDRESS, "body":
  TEXT})``, which needs a person's approval;
* "where am I?" calls ``get_location({})``, a tool the browser runs
  (offered only where an agent has it as a client-side tool);
* after tool results (or a denial) it answers from them;
* anything else gets a short help text that quotes the message.

``delay()`` is the pause before each delta (``UISTREAM_DEMO_DELAY_MS``),
as for the demo model.
"""

from __future__ import annotations

import contextlib
import json
import re
from dataclasses import dataclass, field
from typing import Any

from demo_project import demo_model
from demo_project.demo_model import _COUNT, _EMAIL, _WEATHER, MAX_COUNT, DemoModel, _cities, _words

__all__ = ["Reply", "ToolOutcome", "delay", "get_weather", "reply", "send_email"]

_LOCATE = re.compile(r"\bwhere am i\b", re.IGNORECASE)


def delay() -> float:
    """Seconds to sleep before each delta (``UISTREAM_DEMO_DELAY_MS``)."""
    return DemoModel().delay()


def get_weather(city: str) -> dict[str, Any]:
    """Get the current weather for a city (demo data: made up, but the same
    every time for the same city)."""
    result: dict[str, Any] = demo_model.get_weather.function(city)
    return result


def send_email(to: str, body: str) -> dict[str, Any]:
    """Send an email (the demo only pretends to). Needs a person's approval."""
    result: dict[str, Any] = demo_model.send_email.function(to, body)
    return result


@dataclass(frozen=True)
class ToolOutcome:
    """A tool call's outcome as the model reads it back."""

    name: str
    output: Any
    #: "ok", "error" (the tool failed) or "denied" (a person said no).
    status: str = "ok"


@dataclass(frozen=True)
class Reply:
    """One model turn: reasoning, then text deltas, or tool calls."""

    reasoning: str = ""
    text: list[str] = field(default_factory=list)
    #: (tool name, arguments) in call order.
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)


def reply(prompt: str, outcomes: list[ToolOutcome] | None = None) -> Reply:
    """The demo's answer to ``prompt`` (the last user message), or, when
    tool calls were answered since, to their ``outcomes``."""
    if outcomes:
        return Reply("I have the tool results. Let me put them into words.", _words(_sentences(outcomes)))
    count = _COUNT.search(prompt)
    if count:
        n = min(int(count.group(1)), MAX_COUNT)
        numbers = [str(i) if i == 1 else f" {i}" for i in range(1, n + 1)]
        return Reply(f"The user wants me to count to {n}. I will say each number in turn.", numbers)
    email = _EMAIL.search(prompt)
    if email:
        to, body = email.group(1), email.group(2).strip()
        reason = f"The user wants an email sent to {to}. I will call send_email; a person must approve it."
        return Reply(reason, calls=[("send_email", {"to": to, "body": body})])
    if _LOCATE.search(prompt):
        return Reply("The browser knows where the user is. I will call get_location.", calls=[("get_location", {})])
    if _WEATHER.search(prompt):
        cities = _cities(prompt)
        if not cities:
            return Reply("The user names no city.", _words("Which city would you like the weather for?"))
        reason = f"The user asks about the weather in {', '.join(cities)}. I will call get_weather."
        return Reply(reason, calls=[("get_weather", {"city": city}) for city in cities])
    answer = (
        "I'm an offline demo agent. I can tell you the weather (\"What's the weather in Paris?\"), "
        'count ("count to 20") or send a pretend email ("email ada@example.com saying hello"). '
        f'You said: "{prompt.strip()}"'
    )
    return Reply("This is not something my offline rules cover.", _words(answer))


def _sentences(outcomes: list[ToolOutcome]) -> str:
    said = []
    for outcome in outcomes:
        if outcome.status == "denied":
            said.append(f"I did not run {outcome.name}: the call was denied.")
            continue
        if outcome.status == "error":
            said.append(f"The {outcome.name} tool failed: {outcome.output}")
            continue
        data = outcome.output
        if isinstance(data, str):
            with contextlib.suppress(ValueError):
                data = json.loads(data)
        if outcome.name == "get_weather" and isinstance(data, dict):
            said.append(
                f"In {data.get('city')} it is {data.get('temperature_c')}°C and {data.get('conditions')}, "
                f"with {data.get('humidity_percent')}% humidity."
            )
        elif outcome.name == "send_email" and isinstance(data, dict):
            said.append(f"Done: the email to {data.get('to')} is sent (only pretend: this is the demo).")
        else:
            said.append(f"{outcome.name} returned {json.dumps(data, ensure_ascii=False, default=str)}.")
    return " ".join(said)
