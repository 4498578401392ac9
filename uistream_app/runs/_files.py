"""A user message's files in each provider's form: the shared reading of a
``FilePart`` (its bytes, as base64 or a ``data:`` URL) and the one error
for a file a model can't take. The shapes are the AI SDK's own providers'
(``@ai-sdk/openai``, ``@ai-sdk/anthropic``), checked against them in
``tests/runs/test_file_parts.py``."""

from __future__ import annotations

import base64

from .failures import UnsupportedFileError
from .messages import FilePart

__all__ = ["b64", "data_url", "file_bytes", "is_image", "is_pdf"]


def _bare(media_type: str) -> str:
    return media_type.split(";", 1)[0].strip().lower()


def is_image(part: FilePart) -> bool:
    return _bare(part.media_type).startswith("image/")


def is_pdf(part: FilePart) -> bool:
    return _bare(part.media_type) == "application/pdf"


def file_bytes(part: FilePart, provider: str) -> bytes:
    """The file's bytes; ``UnsupportedFileError`` when the port has only a
    URL the provider can't be sent as it is."""
    data = part.data()
    if data is None:
        raise UnsupportedFileError(provider, part.media_type, part.filename, "its bytes are not available")
    return data


def b64(part: FilePart, provider: str) -> str:
    return base64.b64encode(file_bytes(part, provider)).decode("ascii")


def data_url(part: FilePart, provider: str) -> str:
    return f"data:{part.media_type};base64,{b64(part, provider)}"
