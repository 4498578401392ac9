"""Attachments: the files a user sends with a message, kept in Django's
default storage (docs/operations.md, "Files").

A client sends a file as an ai@7 file part with its bytes in a ``data:``
URL (useChat's POST and WebSocket send; AG-UI's media parts with a
``data`` source become the same part). The store (``store.py``) hands a
submitted message to ``decode_files`` before anything is written: each
``data:`` part is decoded and checked against ``MAX_FILE_BYTES`` (413) and
``ALLOWED_MEDIA_TYPES`` (415), naming the part. Every file part's
``mediaType`` is parsed strictly (``protocol.media_types``: one media
type, nothing a header could be split or widened with) and stored in its
normalised form; a ``data:`` URL must name the same type (400).
``StagedFiles.write`` puts the bytes in ``default_storage`` before the
store's transaction opens (so the transaction stays short) and rewrites
each part's ``url`` to the owner-checked ``/api/files/<id>`` (and its
``mediaType`` to the normalised one); the transaction creates the
``StoredFile`` rows; ``discard`` deletes the written bytes when it fails.
Deleting a row deletes its bytes once the deletion commits (a signal, so
a conversation's cascade, the API and the admin all do).

A run reads the files through ``attach_files``: the model port's
``FilePart`` of a stored part gets a loader that reads the bytes from
storage when a provider builds its request.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Final

from asgiref.sync import sync_to_async
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.db import transaction
from django.db.models.signals import post_delete
from django.dispatch import receiver

from ..conf import settings as uistream_settings
from ..errors import BadRequest, Codes, PayloadTooLarge, UnsupportedMediaType
from ..models import Conversation, Message, StoredFile
from ..protocol.media_types import MediaType, MediaTypeError, parse_media_type
from ..runs.messages import FilePart, ModelMessage, UserMessage

__all__ = [
    "DecodedFile",
    "StagedFiles",
    "attach_files",
    "decode_files",
    "file_id_from_url",
    "file_url",
    "has_file_parts",
    "media_type_allowed",
    "referenced_file_ids",
]

_DATA_URL: Final = re.compile(r"data:([^,]*?)(;base64)?,(.*)", re.DOTALL)
_FILE_URL: Final = re.compile(r"(?:^|/)files/([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})$")
#: Where the bytes go in storage (the storage may adjust the name).
UPLOAD_DIR: Final = "uistream/files"


def file_url(file_id: uuid.UUID | str) -> str:
    """The URL a stored part carries: the app's ``files/<id>`` route (where
    the project included the app: ``/api/files/<id>`` in the demo). The
    model owns it (``StoredFile.url_of``), as Django's models own their
    ``get_absolute_url``."""
    return StoredFile.url_of(file_id)


def file_id_from_url(url: object) -> str | None:
    """The file id in a stored part's ``url`` (None: not one of ours)."""
    if not isinstance(url, str):
        return None
    match = _FILE_URL.search(url)
    return match.group(1) if match else None


def referenced_file_ids(parts: Sequence[Any]) -> list[uuid.UUID]:
    """The stored files that ``parts`` point at by their URL (a message the
    client resends, an edit's)."""
    ids = []
    for part in parts:
        if isinstance(part, Mapping) and part.get("type") == "file":
            found = file_id_from_url(part.get("url"))
            if found is not None:
                ids.append(uuid.UUID(found))
    return ids


def media_type_allowed(media_type: str, allowed: Sequence[str] | None = None) -> bool:
    """Whether ``ALLOWED_MEDIA_TYPES`` lets ``media_type`` in (``image/*``
    matches any image; parameters such as ``;charset=`` are ignored)."""
    patterns = uistream_settings.ALLOWED_MEDIA_TYPES if allowed is None else allowed
    try:
        parsed = parse_media_type(media_type)
    except MediaTypeError:
        return False
    bare, major = parsed.essence, parsed.type
    for pattern in patterns:
        pattern = pattern.strip().lower()
        if pattern == bare or (pattern.endswith("/*") and pattern[:-2] == major):
            return True
    return False


@dataclass(frozen=True)
class DecodedFile:
    """One ``data:`` file part of a submitted message, decoded and checked."""

    index: int  # the part's place in the message
    id: uuid.UUID
    name: str
    media_type: str
    data: bytes = field(repr=False)

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.data).hexdigest()


@dataclass
class StagedFiles:
    """A submitted message's files: decoded (``decode_files``), then written
    to storage (``write``) with the message's parts pointing at them, then
    recorded (``record``) in the store's transaction, or ``discard``\\ ed."""

    message: dict[str, Any]
    files: list[DecodedFile]
    written: dict[uuid.UUID, str] = field(default_factory=dict)

    def write(self) -> dict[str, Any]:
        """Write the bytes to ``default_storage`` (outside any transaction)
        and return the message with each file part's ``url`` replaced."""
        parts = list(self.message["parts"])
        for decoded in self.files:
            name = f"{UPLOAD_DIR}/{decoded.id}/{_storage_filename(decoded)}"
            self.written[decoded.id] = default_storage.save(name, ContentFile(decoded.data))
            part = {k: v for k, v in parts[decoded.index].items() if k != "url"}
            part["url"] = file_url(decoded.id)
            parts[decoded.index] = part
        return {**self.message, "parts": parts}

    def record(self, conversation: Conversation, message: Message) -> None:
        """The ``StoredFile`` rows (inside the store's transaction)."""
        StoredFile.objects.bulk_create(
            StoredFile(
                id=decoded.id,
                conversation=conversation,
                message=message,
                file=self.written[decoded.id],
                name=decoded.name[:255],
                media_type=decoded.media_type,
                size=len(decoded.data),
                sha256=decoded.sha256,
            )
            for decoded in self.files
        )

    def discard(self) -> None:
        """Delete what ``write`` wrote (the transaction failed)."""
        for name in self.written.values():
            default_storage.delete(name)
        self.written.clear()


def _storage_filename(decoded: DecodedFile) -> str:
    """A name that is safe as a path: the client's filename's last
    component, else ``file``."""
    base = re.sub(r"[^A-Za-z0-9._-]+", "_", decoded.name.rsplit("/", 1)[-1].rsplit("\\", 1)[-1]).strip("._")
    return base[:100] or "file"


def has_file_parts(message: Mapping[str, Any]) -> bool:
    """Whether ``message`` has any file part (``decode_files`` has work)."""
    return any(isinstance(part, Mapping) and part.get("type") == "file" for part in message.get("parts") or ())


def decode_files(message: Mapping[str, Any], *, where: str = "message") -> StagedFiles | None:
    """The file parts of a user message, checked, and its ``data:`` parts
    decoded; None when it has no file part. Every file part's
    ``mediaType`` must be one media type (400) that ``ALLOWED_MEDIA_TYPES``
    takes (415), and is replaced by its normalised form; a ``data:`` part's
    bytes are checked against ``MAX_FILE_BYTES`` (413) before and after
    decoding; a ``data:`` URL that is not base64 or names another media
    type than the part is a 400. Nothing is written here."""
    max_bytes = uistream_settings.MAX_FILE_BYTES
    files: list[DecodedFile] = []
    parts = list(message.get("parts") or ())
    for index, part in enumerate(parts):
        if not isinstance(part, Mapping) or part.get("type") != "file":
            continue
        at = f"{where}.parts[{index}]"
        declared = part.get("mediaType", "")
        try:
            media_type = parse_media_type(declared)
        except MediaTypeError as exc:
            raise BadRequest(f"{at}.mediaType: {exc}", field=f"{at}.mediaType") from None
        label = f"{at} ({part.get('filename') or 'a file'}, {media_type})"
        if not media_type_allowed(str(media_type)):
            raise UnsupportedMediaType(
                f"{label}: files of type {media_type} are not accepted here", field=f"{at}.mediaType"
            )
        parts[index] = {**part, "mediaType": str(media_type)}
        url = part.get("url")
        match = _DATA_URL.fullmatch(url) if isinstance(url, str) else None
        if match is None:
            continue  # a URL of its own (https:, or one of ours resent): kept as it is
        if not match.group(2):
            raise BadRequest(f"{at}.url: a data: URL must be base64", field=f"{at}.url")
        _check_data_url_type(match.group(1), media_type, at)
        payload = match.group(3)
        # Base64 is 4 bytes for every 3: refuse a large file before decoding it.
        if len(payload) // 4 * 3 - 2 > max_bytes:
            raise _too_big(label, at, max_bytes)
        try:
            data = base64.b64decode(payload, validate=True)
        except (binascii.Error, ValueError):
            raise BadRequest(f"{at}.url: the data: URL is not valid base64", field=f"{at}.url") from None
        if len(data) > max_bytes:
            raise _too_big(label, at, max_bytes)
        name = part.get("filename")
        files.append(DecodedFile(index, uuid.uuid4(), name if isinstance(name, str) else "", str(media_type), data))
    if not has_file_parts(message):
        return None
    return StagedFiles({**message, "parts": parts}, files)


def _check_data_url_type(declared: str, media_type: MediaType, at: str) -> None:
    """A ``data:`` URL's own type must be the part's (parameters aside): a
    ``data:text/html`` URL is not an image because its part says so."""
    if not declared:
        raise BadRequest(
            f"{at}.url: the data: URL names no media type (the part says {media_type.essence})", field=f"{at}.url"
        )
    try:
        own = parse_media_type(declared)
    except MediaTypeError as exc:
        raise BadRequest(f"{at}.url: the data: URL's type: {exc}", field=f"{at}.url") from None
    if own.essence != media_type.essence:
        raise BadRequest(
            f"{at}.url: the data: URL is {own.essence}, the part's mediaType {media_type.essence}", field=f"{at}.url"
        )


def _too_big(label: str, at: str, max_bytes: int) -> PayloadTooLarge:
    return PayloadTooLarge(f"{label} is larger than {max_bytes} bytes", code=Codes.FILE_TOO_LARGE, field=f"{at}.url")


@receiver(post_delete, sender=StoredFile, dispatch_uid="uistream_stored_file_bytes")
def _delete_bytes(sender: Any, instance: StoredFile, **kwargs: Any) -> None:
    """A deleted row's bytes go too, once the deletion commits (a rolled
    back deletion keeps them)."""
    name = instance.file.name
    if name:
        storage = instance.file.storage
        transaction.on_commit(lambda: storage.delete(name))


# -- what a run reads ------------------------------------------------------------------


def _reader(name: str) -> Any:
    def read() -> bytes:
        with default_storage.open(name, "rb") as handle:
            data: bytes = handle.read()
            return data

    return read


def _attach_sync(messages: list[ModelMessage], conversation_id: str) -> list[ModelMessage]:
    wanted = {
        file_id
        for m in messages
        if isinstance(m, UserMessage)
        for f in m.files
        if (file_id := file_id_from_url(f.url)) is not None and f.load is None
    }
    if not wanted:
        return messages
    # Only this conversation's files: a part that names another chat's file
    # (someone else's) reads nothing, whatever its URL says.
    rows = {
        str(row.pk): row
        for row in StoredFile.objects.filter(conversation_id=conversation_id, pk__in=[uuid.UUID(i) for i in wanted])
    }
    out: list[ModelMessage] = []
    for message in messages:
        if isinstance(message, UserMessage) and message.files:
            parts: list[str | FilePart] = []
            for f in message.ordered():
                row = rows.get(file_id_from_url(f.url) or "") if isinstance(f, FilePart) else None
                if isinstance(f, FilePart) and row is not None and f.load is None:
                    f = replace(f, filename=f.filename or row.name, size=row.size, load=_reader(row.file.name or ""))
                parts.append(f)
            files = tuple(p for p in parts if isinstance(p, FilePart))
            message = replace(message, files=files, parts=tuple(parts))
        out.append(message)
    return out


async def attach_files(messages: list[ModelMessage], conversation_id: str) -> list[ModelMessage]:
    """``messages`` with each stored file (a ``FilePart`` whose URL is one
    of the chat's ``/api/files/<id>``; ``conversation_id`` is the
    conversation's key) given its size and a loader that reads its bytes
    from storage when a provider needs them."""
    if not any(isinstance(m, UserMessage) and m.files for m in messages):
        return messages
    return await sync_to_async(_attach_sync, thread_sensitive=True)(messages, conversation_id)
