"""Deprecated names of the first release, kept for one release.

``ChatRunMixin`` was the user's hooks, the database work of a turn and the
launcher of its run at once; it is now ``hooks.ChatHooks`` (the hooks),
``store.ConversationStore`` (the database work) and ``runner.Runner`` (the
launch). Import from those modules.
"""

from __future__ import annotations

from typing import Any

from .errors import not_found
from .hooks import ChatHooks, ServerToolLoop
from .owners import Owner
from .runner import execute_run
from .store import ToolAnswer, new_message_id

__all__ = ["ChatRunMixin", "ServerToolLoop", "ToolAnswer", "decided_by", "execute_run", "new_message_id", "not_found"]

#: Deprecated: use ``uistream_app.hooks.ChatHooks``.
ChatRunMixin = ChatHooks


def decided_by(conversation: Any) -> str:
    """Who answered a pending tool call of ``conversation``: its owner, as
    ``Owner.describe`` names them (deprecated: use ``Owner.describe``)."""
    if conversation.owner_id is not None:
        return Owner.of_user(conversation.owner).describe()
    return Owner.of_session(conversation.session_key).describe()
