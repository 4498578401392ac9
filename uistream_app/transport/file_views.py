"""GET ``files/<id>``: an attached file's bytes, for its owner only.

The stored part of a file a user sent points here (``uistream_app.lifecycle.attachments``).
The owner of the file's conversation gets its bytes with their media type;
anyone else, another anonymous session included, gets the one JSON 404 of
a missing file (``errors.not_found``): no oracle for whose files exist.

The type served is the stored one in its normalised form
(``protocol.media_types``); a row stored before types were parsed strictly
whose type does not parse is served as ``application/octet-stream``, a
download, rather than breaking the response's headers.
"""

from __future__ import annotations

import uuid
from typing import Any, ClassVar

from asgiref.sync import sync_to_async
from django.http import HttpRequest, HttpResponse
from django.utils.http import content_disposition_header

from ..errors import not_found
from ..models import Conversation, StoredFile
from ..protocol.media_types import OCTET_STREAM, MediaType, served_media_type
from .pipeline import RequestContext, StreamView

__all__ = ["FileView"]

#: Shown in the browser (an ``<img>``, a plain-text tab): raster images a
#: browser decodes as pictures only, and plain text. Anything else, PDFs,
#: SVG (an image that can carry script), HTML and XML included, is a
#: download. Compared with the parsed type's essence, so no parameter,
#: case or trailing text can widen it.
INLINE_TYPES = frozenset(
    {"image/png", "image/jpeg", "image/gif", "image/webp", "image/avif", "image/bmp", "image/apng", "text/plain"}
)


def _inline(media_type: MediaType | None) -> bool:
    return media_type is not None and media_type.essence in INLINE_TYPES


class FileView(StreamView):
    """The owner's file ``file_id``, else the 404 (see the module docstring)."""

    http_method_names: ClassVar[list[str]] = ["get", "options"]  # type: ignore[misc]

    async def get(self, request: HttpRequest, context: RequestContext, file_id: str) -> HttpResponse:
        try:
            pk = uuid.UUID(file_id)
        except ValueError:
            raise not_found() from None
        owned = Conversation.objects.owned_by(context.owner)
        row = await StoredFile.objects.filter(pk=pk, conversation__in=owned).afirst()
        if row is None:
            raise not_found()
        data = await sync_to_async(_read, thread_sensitive=False)(row)
        if data is None:
            raise not_found()  # the row outlived its bytes (storage emptied by hand)
        media_type = served_media_type(row.media_type)
        response = HttpResponse(data, content_type=str(media_type) if media_type else OCTET_STREAM)
        response["Content-Disposition"] = (
            content_disposition_header(not _inline(media_type), row.name or f"{row.pk}") or "attachment"
        )
        response["X-Content-Type-Options"] = "nosniff"
        # A file a user sent is never a page of this site: no script, no forms.
        response["Content-Security-Policy"] = (
            "sandbox; default-src 'none'; img-src 'self' data:; style-src 'unsafe-inline'"
        )
        response["Cache-Control"] = "private, max-age=3600"
        return response


def _read(row: StoredFile) -> Any:
    try:
        with row.file.storage.open(row.file.name or "", "rb") as handle:
            return handle.read()
    except FileNotFoundError:
        return None
