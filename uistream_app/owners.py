"""Who a request acts for: ``Owner``, the one value every ownership check
goes through (``Conversation.objects.owned_by(owner)``).

An owner is a signed-in user, or, where anonymous chats are allowed, the
Django session of an anonymous visitor. A visitor who has no session yet
owns nothing (``is_known`` is False) until a valid request creates one.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

__all__ = ["Owner"]


@dataclass(frozen=True)
class Owner:
    """A user (``user`` set) or an anonymous session (``session_key``)."""

    user: Any = None
    session_key: str | None = None

    @classmethod
    def of_user(cls, user: Any) -> Owner:
        return cls(user=user)

    @classmethod
    def of_session(cls, session_key: str | None) -> Owner:
        return cls(session_key=session_key or None)

    @classmethod
    def of_conversation(cls, conversation: Any) -> Owner:
        """The owner of a stored conversation (a ``Conversation`` row; its
        ``owner`` is read, so select it with the row)."""
        if conversation.owner_id is not None:
            return cls(user=conversation.owner)
        return cls.of_session(conversation.session_key)

    @property
    def is_user(self) -> bool:
        return self.user is not None

    @property
    def is_known(self) -> bool:
        """Whether the owner can own anything (a user, or a session that exists)."""
        return self.user is not None or bool(self.session_key)

    def filter_kwargs(self, prefix: str = "") -> dict[str, Any]:
        """Query filters selecting what this owner owns (``prefix`` for a
        relation, e.g. ``"conversation__"``). Only ``owned_by`` uses them."""
        if self.user is not None:
            return {f"{prefix}owner": self.user}
        return {f"{prefix}owner": None, f"{prefix}session_key": self.session_key or ""}

    def create_kwargs(self) -> dict[str, Any]:
        """The fields of a conversation this owner creates."""
        if self.user is not None:
            return {"owner": self.user}
        return {"owner": None, "session_key": self.session_key or ""}

    def owns(self, conversation: Any) -> bool:
        """Whether ``conversation`` (a ``Conversation`` row) is this owner's."""
        if not self.is_known:
            return False
        if self.user is not None:
            return bool(conversation.owner_id == self.user.pk)
        return bool(conversation.owner_id is None and conversation.session_key == self.session_key)

    @property
    def ident(self) -> str:
        """A stable key for counters (throttles): the user's pk, or a digest
        of the session key (never the key itself)."""
        if self.user is not None:
            return f"user:{self.user.pk}"
        return f"session:{self.session_digest}"

    @property
    def row_key(self) -> str:
        """The key of rows that count what this owner did (``OwnerDay``):
        the user's pk, or the whole SHA-256 of the session key (never the
        key itself; unlike ``ident``'s, no two sessions share it)."""
        return self.row_key_of(self.user.pk if self.user is not None else None, self.session_key)

    @staticmethod
    def row_key_of(user_pk: Any, session_key: str | None) -> str:
        """``row_key`` of the owner of a conversation whose ``owner_id`` is
        ``user_pk`` and ``session_key`` its session key."""
        if user_pk is not None:
            return f"user:{user_pk}"
        return "session:" + hashlib.sha256((session_key or "").encode()).hexdigest()

    @property
    def session_digest(self) -> str:
        """A fingerprint of the session key: 12 hex digits of its SHA-256.
        Staff tell visitors apart by it; the key (a credential: whoever has
        it is the visitor) can't be had back from it."""
        return hashlib.sha256((self.session_key or "").encode()).hexdigest()[:12]

    def describe(self) -> str:
        """Who this is, as staff read it (stored with decisions, shown in
        the admin and its usage report): a user by id and name, a visitor
        by the fingerprint of the session key, never the key itself."""
        if self.user is not None:
            name = self.user.get_username() if hasattr(self.user, "get_username") else ""
            return f"user {self.user.pk} ({name})" if name else f"user {self.user.pk}"
        return f"anonymous visitor {self.session_digest}"
