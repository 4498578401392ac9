"""Every attempt kept: a conversation's messages as a tree of branches.

A regenerated answer and an edited question are new *versions* of the
message at their position: the older version and everything that followed
it leave the current branch (``retire_from``) and stay stored, on their
own branch. Versions of one message share its parent (``parent_key``) and
position, and the client's id (``Message.ui_id``). ``switch_to`` makes a
version current again, and below it, at each position, the reply that was
most recently current (``selected_at``): the branch as it was when it was
left, as the "‹ 1/2 ›" of every chat product brings it back.

The current branch is what ``useChat`` loads, what AG-UI's snapshot
holds and what a model's history is built from
(``MessageQuerySet.current``; a message's versions and its own branch are
``Message.versions`` and ``Message.branch_before``); clients that know nothing of versions see
only it, as before versions were kept. Synchronous: call these in the
transaction that holds the conversation's row (``select_for_update``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from django.utils import timezone

from ..models import Conversation, Message

__all__ = ["Versions", "retire_from", "switch_to", "versions"]


def retire_from(conversation: Conversation, position: int) -> int:
    """Take the current branch's messages from ``position`` on off it
    (kept, on the branch they are on); returns how many rows left it."""
    return Message.objects.filter(conversation=conversation, current=True, position__gte=position).update(current=False)


@dataclass(frozen=True)
class Versions:
    """How many versions a message has and which of them (1-based) it is."""

    count: int
    number: int

    def as_json(self) -> dict[str, int]:
        return {"count": self.count, "current": self.number}


def versions(messages: Iterable[Message]) -> dict[str, Versions]:
    """For each of ``messages`` (of one conversation) that has more than
    one version, by key: its ``Versions``. One query, whatever the number
    of messages."""
    rows = list(messages)
    if not rows:
        return {}
    wanted = {(m.position, m.parent_key) for m in rows}
    positions = sorted({m.position for m in rows})
    siblings: dict[tuple[int, str], list[str]] = {}
    found = (
        Message.objects.filter(
            conversation_id=rows[0].conversation_id, position__gte=positions[0], position__lte=positions[-1]
        )
        .order_by("created_at", "pk")
        .values_list("position", "parent_key", "pk")
    )
    for position, parent_key, pk in found:
        if (position, parent_key) in wanted:
            siblings.setdefault((position, parent_key), []).append(pk)
    result: dict[str, Versions] = {}
    for message in rows:
        group = siblings.get((message.position, message.parent_key), [])
        if len(group) > 1 and message.pk in group:
            result[message.pk] = Versions(len(group), group.index(message.pk) + 1)
    return result


def switch_to(conversation: Conversation, version: Message) -> list[str]:
    """Make ``version`` current, with what followed it when its branch was
    last current; returns the keys that joined the current branch, in
    order. Nothing changes when it is current already."""
    if version.current:
        return []
    # The branch below ``version``: at each position, the child most
    # recently current. One query for every row below it.
    below = Message.objects.filter(conversation=conversation, position__gt=version.position).order_by(
        "position", "-selected_at", "-created_at"
    )
    children: dict[str, str] = {}
    for key, parent_key in below.values_list("pk", "parent_key"):
        children.setdefault(parent_key, key)  # the first is the most recently selected
    path = [version.pk]
    while path[-1] in children:
        path.append(children[path[-1]])
    # Above it, its ancestors must be current too: a version of a message
    # of an older branch brings that branch back from where it forked.
    ancestors = version.branch_before()
    left = [m for m in ancestors if not m.current]
    fork = left[0].position if left else version.position
    joined = [m.pk for m in ancestors if m.position >= fork] + path
    retire_from(conversation, fork)
    Message.objects.filter(pk__in=joined).update(current=True, selected_at=timezone.now())
    return joined
