"""History strategies: which of a conversation's stored messages a turn
sends to the model, and in what form (docs/operations.md, "History
strategies").

A strategy works in two stages. ``select`` runs in the store's transaction
(``ChatHooks.get_history``) and picks the stored rows a run loads; ``build``
runs when the run starts and turns them into the model messages sent:
whole turns (a user message with the assistant messages answering it, so
a tool call always travels with its result), the system prompt first,
tool results too large for the context shortened with a marker. What it
sent is stored on the run (``Run.history``: counts, and the messages
themselves, bounded by ``runs.given``) and shown in the admin's run page;
an agent's run records what its adapter was handed (``agent_source``).

* ``AllMessages``: everything.
* ``LastMessages(n)``: the last ``n`` stored messages, starting at a user
  message (the default, ``HISTORY_MAX_MESSAGES``).
* ``TokenBudget(max_tokens)``: the newest whole turns that fit in
  ``max_tokens`` with the system prompt; the current turn always.
* ``SummarizeOlder(keep_messages)``: the last ``keep_messages`` verbatim,
  the older ones as a summary the run's model wrote, stored on the
  conversation (``Conversation.history_summary``) and extended only when
  ``batch_messages`` more have aged out of the verbatim window: computed
  once, reused by the next turns.

Token counts are estimates: ``estimate_tokens`` is characters / 4 (rounded
up) plus 4 per message, the usual rule of thumb for English text with
BPE tokenizers; pass ``estimate=`` (text → tokens) to use a real tokenizer.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Sequence
from contextlib import aclosing
from typing import TYPE_CHECKING, Any

from django.utils import timezone

from .conf import import_from_string
from .lifecycle.attachments import attach_files
from .models import Conversation, Message, MessageQuerySet, Run
from .protocol.events import Event, TextDelta, Usage
from .recording import CURRENT_RECORDER
from .runs import ChatModel, SystemMessage, ToolLoop, model_name, shared_model, ui_to_model_messages
from .runs.given import messages_record
from .runs.messages import AssistantMessage, ModelMessage, ToolMessage, UserMessage

if TYPE_CHECKING:
    from .adapters import AgentAdapter, AgentTurn

__all__ = [
    "AllMessages",
    "HistoryStrategy",
    "LastMessages",
    "SummarizeOlder",
    "TokenBudget",
    "estimate_tokens",
    "load_strategy",
    "message_tokens",
]

UIMessage = dict[str, Any]
Estimate = Callable[[str], int]

#: Tokens every message costs beyond its text (role, framing).
MESSAGE_OVERHEAD = 4


def estimate_tokens(text: str) -> int:
    """The documented heuristic: one token per four characters."""
    return math.ceil(len(text) / 4)


def message_tokens(message: ModelMessage, estimate: Estimate = estimate_tokens) -> int:
    """The estimated tokens of one model message."""
    text = getattr(message, "content", "")
    if isinstance(message, AssistantMessage):
        text += message.reasoning + "".join(c.name + c.arguments for c in message.tool_calls)
    return estimate(text) + MESSAGE_OVERHEAD


def _turns(history: Sequence[UIMessage]) -> list[list[UIMessage]]:
    """``history`` in whole turns: each starts at a user message."""
    turns: list[list[UIMessage]] = []
    for message in history:
        if message.get("role") == "user" or not turns:
            turns.append([])
        turns[-1].append(message)
    return turns


@dataclasses.dataclass
class Build:
    """One turn's building: what ``choose`` may read and write (a strategy
    object is shared by every request, so per-turn state lives here)."""

    model: ChatModel
    #: The client's chat id (unique per owner only).
    chat_id: str
    #: The estimated tokens of what is sent anyway (the system prompt).
    fixed_tokens: int = 0
    #: What is stored as ``Run.history``.
    record: dict[str, Any] = dataclasses.field(default_factory=dict)
    #: The ``Usage`` of model calls made while building (a summary's).
    usage: list[Usage] = dataclasses.field(default_factory=list)
    #: The conversation's key (``Conversation.pk``): what to look it up by.
    conversation_id: str = ""

    def __post_init__(self) -> None:
        if not self.conversation_id:
            self.conversation_id = self.chat_id


class HistoryStrategy:
    """The base: all stored messages, tool results shortened. Subclasses
    override ``select`` (what is loaded) and ``choose`` (what is sent)."""

    name = "all"
    #: A tool result longer than this (estimated tokens) is cut, with a
    #: marker saying how much; None: never.
    max_tool_result_tokens: int | None = 4000

    def __init__(self, *, max_tool_result_tokens: int | Any | None = ..., estimate: Estimate | None = None) -> None:
        if max_tool_result_tokens is not ...:
            self.max_tool_result_tokens = max_tool_result_tokens
        self.estimate: Estimate = estimate or estimate_tokens

    # -- stage 1: the rows (sync, in the store's transaction) ----------------------

    def select(self, messages: MessageQuerySet) -> list[Message]:
        return list(messages)

    # -- stage 2: what is sent (async, when the run starts) ------------------------

    async def choose(self, history: list[UIMessage], build: Build) -> tuple[list[UIMessage], list[ModelMessage]]:
        """The UI messages sent verbatim, and model messages sent before
        them (a summary). Default: all of them."""
        return history, []

    async def build(
        self,
        history: list[UIMessage],
        *,
        system_prompt: str | None,
        model: ChatModel,
        chat_id: str,
        conversation_id: str = "",
    ) -> tuple[list[ModelMessage], Build]:
        """The model messages of a turn, and the build (its ``record`` of
        what they hold, stored as ``Run.history``). ``chat_id`` is the
        client's; ``conversation_id`` the conversation's key (default: the
        chat id, as keys were before chat ids were per owner)."""
        prompt = [SystemMessage(system_prompt)] if system_prompt else []
        build = Build(
            model, chat_id, sum(message_tokens(m, self.estimate) for m in prompt), conversation_id=conversation_id
        )
        record = build.record
        record.update({"strategy": self.name, "stored_messages": len(history)})
        kept, before = await self.choose(history, build)
        messages: list[ModelMessage] = list(prompt)
        messages += before
        messages += self.shorten(ui_to_model_messages(kept), record)
        messages = await attach_files(messages, build.conversation_id)  # stored files read from storage
        record["messages"] = [str(m.get("id", "")) for m in kept]
        record["model_messages"] = len(messages)
        record["estimated_tokens"] = sum(message_tokens(m, self.estimate) for m in messages)
        record["sent"] = messages_record(messages, system_prompt=system_prompt)
        return messages, build

    def shorten(self, messages: list[ModelMessage], record: dict[str, Any]) -> list[ModelMessage]:
        """Tool results over ``max_tool_result_tokens``, cut with a marker."""
        limit = self.max_tool_result_tokens
        if limit is None:
            return messages
        out: list[ModelMessage] = []
        cut: list[str] = []
        for message in messages:
            if isinstance(message, ToolMessage) and self.estimate(message.content) > limit:
                keep = limit * 4
                dropped = len(message.content) - keep
                marker = f"\n[… {dropped} more characters of this tool result were cut to fit the context]"
                message = dataclasses.replace(message, content=message.content[:keep] + marker)
                cut.append(message.tool_call_id)
            out.append(message)
        if cut:
            record["shortened_tool_results"] = cut
        return out

    def source(
        self,
        history: list[UIMessage],
        run: Any,
        model: ChatModel,
        system_prompt: str | None,
        loop: ToolLoop,
    ) -> AsyncIterator[Event]:
        """The run's events: the history built (and recorded on the run),
        then the tool loop over it. Building happens inside the run, so a
        failing summary is the run's in-band error."""
        return self._source(history, run, model, system_prompt, loop)

    async def _source(
        self, history: list[UIMessage], run: Any, model: ChatModel, system_prompt: str | None, loop: ToolLoop
    ) -> AsyncGenerator[Event, None]:
        messages, build = await self.build(
            history,
            system_prompt=system_prompt,
            model=model,
            chat_id=run.chat_id,
            conversation_id=run.conversation_id,
        )
        await _store_record(run, build.record)
        for spent in build.usage:  # a summary's model call is the run's spend too
            yield spent
        async with aclosing(
            loop.run(
                messages,
                approvals=run.approvals,
                client_results=run.client_results,
                context=run,
                steering=getattr(run, "steering", None),
                steps_taken=getattr(run, "steps_taken", 0),
            )
        ) as events:
            async for event in events:
                yield event

    def agent_source(
        self, history: list[UIMessage], run: Any, turn: AgentTurn, adapter: AgentAdapter
    ) -> AsyncIterator[Event]:
        """An agent's run: what its adapter is handed (``turn.messages``,
        the rows ``select`` chose) recorded on the run as a built history
        is, then the adapter's events. The framework may still change what
        its model is sent (its own instructions, trimming): the record is
        what the agent was given."""
        return self._agent_source(history, run, turn, adapter)

    async def _agent_source(
        self, history: list[UIMessage], run: Any, turn: AgentTurn, adapter: AgentAdapter
    ) -> AsyncGenerator[Event, None]:
        # The chat's stored files get their loaders, as the tool loop's do:
        # the adapter hands their bytes to its framework.
        messages = await attach_files(turn.messages, run.conversation_id)
        if messages is not turn.messages:
            turn = dataclasses.replace(turn, messages=messages)
        record = {
            "strategy": self.name,
            "stored_messages": len(history),
            "messages": [str(m.get("id", "")) for m in history],
            "model_messages": len(turn.messages),
            "estimated_tokens": sum(message_tokens(m, self.estimate) for m in turn.messages),
            "sent": messages_record(turn.messages, system_prompt=turn.system_prompt),
        }
        await _store_record(run, record)
        events = adapter.run(turn)
        try:
            async for event in events:
                yield event
        finally:
            # Closed as the runner would close the adapter's own iterator
            # (a stop, a disconnect): the framework's run must not go on.
            close = getattr(events, "aclose", None)
            if close is not None:
                await close()


async def _store_record(run: Any, record: dict[str, Any]) -> None:
    """Store ``record`` as the run's ``history``: with its first chunks
    when a recorder runs it (the model need not wait for the database),
    else in a write of its own."""
    recorder = CURRENT_RECORDER.get()
    if recorder is not None:
        recorder.store_with_run(history=record)
    else:
        await Run.objects.filter(pk=run.run.pk).aupdate(history=record)


class AllMessages(HistoryStrategy):
    """Every stored message (long chats grow without bound)."""

    name = "all"


class LastMessages(HistoryStrategy):
    """The last ``limit`` stored messages, starting at a user message so no
    answer is cut from its question."""

    name = "last"

    def __init__(self, limit: int | None = 100, **options: Any) -> None:
        super().__init__(**options)
        self.limit = limit

    def select(self, messages: MessageQuerySet) -> list[Message]:
        if self.limit is None:
            return list(messages)
        chosen = list(messages.order_by("-position")[: self.limit])[::-1]
        while len(chosen) > 1 and chosen[0].role != "user":
            chosen.pop(0)
        return chosen


class TokenBudget(HistoryStrategy):
    """The newest whole turns whose estimated tokens, with the system
    prompt, fit in ``max_tokens``; the current turn always (its tool
    results shortened). ``max_messages`` bounds the rows loaded."""

    name = "token_budget"

    def __init__(self, max_tokens: int, *, max_messages: int | None = 1000, **options: Any) -> None:
        super().__init__(**options)
        self.max_tokens = max_tokens
        self.max_messages = max_messages

    def select(self, messages: MessageQuerySet) -> list[Message]:
        return LastMessages(self.max_messages).select(messages)

    async def choose(self, history: list[UIMessage], build: Build) -> tuple[list[UIMessage], list[ModelMessage]]:
        turns = _turns(history)
        kept: list[list[UIMessage]] = []
        used = build.fixed_tokens  # the system prompt counts against the budget
        for number, turn in enumerate(reversed(turns)):
            cost = sum(message_tokens(m, self.estimate) for m in self.shorten(ui_to_model_messages(turn), {}))
            if number and used + cost > self.max_tokens:
                break
            kept.append(turn)
            used += cost
        build.record["dropped_messages"] = len(history) - sum(len(t) for t in kept)
        return [m for turn in reversed(kept) for m in turn], []


SUMMARY_INSTRUCTIONS = (
    "Summarise the conversation below for the assistant who continues it: the user's goals, facts and "
    "decisions established, tool results that still matter, open questions. Be brief; write no preamble."
)


class SummarizeOlder(HistoryStrategy):
    """The last ``keep_messages`` verbatim (from a user message on), the
    older ones as a summary written by the run's model (or
    ``summary_model``). The summary is stored on the conversation with the
    id of the last message it covers, and extended (the old summary plus
    the messages that aged out) only once ``batch_messages`` more messages
    wait beyond the verbatim window: between two summaries, turns reuse
    the stored one and the verbatim part grows from ``keep_messages`` to
    ``keep_messages + batch_messages``."""

    name = "summarize"

    def __init__(
        self,
        keep_messages: int = 20,
        *,
        batch_messages: int = 20,
        summary_model: ChatModel | str | None = None,
        instructions: str = SUMMARY_INSTRUCTIONS,
        **options: Any,
    ) -> None:
        super().__init__(**options)
        self.keep_messages = keep_messages
        self.batch_messages = batch_messages
        self.summary_model = summary_model
        self.instructions = instructions

    def select(self, messages: MessageQuerySet) -> list[Message]:
        # Load from the summary's last message on (it marks where the
        # summary ends); all of them when there is none or it was edited away.
        first = messages.first()
        if first is None:
            return []
        summary = (
            Conversation.objects.filter(pk=first.conversation_id).values_list("history_summary", flat=True).first()
        )
        if isinstance(summary, dict) and isinstance(summary.get("through_position"), int):
            rows = list(messages.filter(position__gte=summary["through_position"]))
            if rows and _summary_ends_at(summary, rows[0]):
                return rows
        return list(messages)

    async def choose(self, history: list[UIMessage], build: Build) -> tuple[list[UIMessage], list[ModelMessage]]:
        key, record = build.conversation_id, build.record
        conversation = await Conversation.objects.filter(pk=key).only("history_summary").afirst()
        summary = conversation.history_summary if conversation is not None else None
        ids = [str(m.get("id", "")) for m in history]
        rest = history
        text = ""
        if isinstance(summary, dict) and summary.get("through_key"):
            # Versions of a question share its id: the summary's own row
            # must be on the current branch, or it summarizes another branch.
            on_branch = await Message.objects.filter(pk=summary["through_key"], current=True).aexists()
            if not on_branch:
                summary = None
        if isinstance(summary, dict) and summary.get("through") in ids:
            rest = history[ids.index(summary["through"]) + 1 :]
            text = str(summary.get("text", ""))
        else:
            summary = None
        if len(rest) > self.keep_messages + self.batch_messages:
            cut = len(rest) - self.keep_messages
            while cut < len(rest) - 1 and rest[cut].get("role") != "user":
                cut += 1  # the verbatim part starts a turn
            older, rest = rest[:cut], rest[cut:]
            text = await self.summarize(text, older, build)
            through = older[-1]
            found = (
                await Message.objects.filter(conversation_id=key)
                .current()
                .with_client_id(str(through["id"]))
                .values_list("position", "pk")
                .afirst()
            )
            position, through_key = found if found is not None else (None, "")
            summary = {
                "text": text,
                "through": str(through["id"]),
                "through_key": through_key,
                "through_position": position,
                "covers": (summary or {}).get("covers", 0) + len(older),
                "model": model_name(self._model(build.model)),
                "created_at": timezone.now().isoformat(),
            }
            await Conversation.objects.filter(pk=key).aupdate(history_summary=summary)
            record["summary_written"] = True
        if summary is None:
            return rest, []
        record["summary"] = {"text": text, "through": summary["through"], "covers": summary.get("covers")}
        return rest, [SystemMessage("Summary of the earlier conversation:\n" + text)]

    def _model(self, model: ChatModel) -> ChatModel:
        value = self.summary_model
        if value is None:
            return model
        if isinstance(value, str):
            return shared_model(value)
        return value

    async def summarize(self, previous: str, older: list[UIMessage], build: Build) -> str:
        """The summary of ``previous`` (the summary so far) and ``older``."""
        lines = [f"Summary so far:\n{previous}\n"] if previous else []
        for message in self.shorten(ui_to_model_messages(older), {}):
            if isinstance(message, UserMessage):
                lines.append(f"User: {message.content}")
            elif isinstance(message, AssistantMessage):
                calls = "".join(f" [called {c.name}({c.arguments})]" for c in message.tool_calls)
                lines.append(f"Assistant: {message.content}{calls}")
            elif isinstance(message, ToolMessage):
                lines.append(f"Tool result ({message.tool_name or message.tool_call_id}): {message.content}")
        prompt: list[ModelMessage] = [SystemMessage(self.instructions), UserMessage("\n".join(lines))]
        parts: list[str] = []
        async with aclosing(self._model(build.model).stream(prompt, (), None)) as stream:  # type: ignore[type-var]
            async for event in stream:
                if isinstance(event, TextDelta):
                    parts.append(event.text)
                elif isinstance(event, Usage):
                    build.usage.append(event)
        return "".join(parts).strip()


def load_strategy(value: Any, setting: str = "UISTREAM['HISTORY_STRATEGY']") -> HistoryStrategy | None:
    """A strategy from a setting: an object, a class, or a dotted path
    (``ImproperlyConfigured`` naming ``setting`` when it can't be imported;
    ``TypeError`` when it is no strategy)."""
    if value is None:
        return None
    if isinstance(value, str):
        value = import_from_string(value, setting)
    if isinstance(value, type):
        value = value()
    if not isinstance(value, HistoryStrategy):
        raise TypeError(f"a history strategy is a HistoryStrategy, not {value!r}")
    return value


def _summary_ends_at(summary: dict[str, Any], message: Message) -> bool:
    """Whether the stored summary covers the branch up to ``message``: its
    key, for a summary that stored it (the versions of an edited question
    share its id); its id, for one written before versions were kept."""
    if summary.get("through_key"):
        return bool(message.pk == summary["through_key"])
    return message.ui_id == summary.get("through")
