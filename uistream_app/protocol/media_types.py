"""Media types, parsed strictly: what a file part's ``mediaType`` (and its
``data:`` URL's) may be, and the one normalised form that is stored and
served.

A media type is ``type "/" subtype``, each an RFC 6838 restricted name
(a letter or digit, then up to 126 of letters, digits and
``! # $ & - ^ _ . +``), then any number of ``; name=value`` parameters as
RFC 9110 writes them (the name a token, the value a token or a quoted
string), with optional spaces or tabs around each ``;``. Nothing else:
no comma (``image/png, text/html`` is two types, not one), no control
character (``image/png\\r\\nX-Injected: 1`` would be a second header), no
space inside a name, no empty part, nothing beyond ASCII, and no more than
``MAX_LENGTH`` characters (the stored column's width).

The normalised form (``MediaType.__str__``) lowercases the type, the
subtype and the parameter names, keeps the values as they were (a
``charset`` is case-insensitive, a ``boundary`` is not) and writes them
``type/subtype; name=value``, quoting a value only where it is not a
token. A string that parses is therefore always a valid ``Content-Type``
header value with the same meaning.

A deliberate divergence from RFC 9110: ``obs-text`` (bytes 0x80-0xFF) is
refused in a quoted value. Such a value has no one reading in a header
(Latin-1 to Django, UTF-8 to a browser), and no file type needs one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

__all__ = ["MAX_LENGTH", "OCTET_STREAM", "MediaType", "MediaTypeError", "parse_media_type", "served_media_type"]

#: The longest media type taken, parameters included (``StoredFile.media_type``'s width).
MAX_LENGTH: Final = 255
#: What a stored type that does not parse (a row from before this module) is served as.
OCTET_STREAM: Final = "application/octet-stream"

_NAME: Final = r"[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,126}"
_TOKEN: Final = r"[!#$%&'*+.^_`|~0-9A-Za-z-]+"
# qdtext (HTAB, SP, VCHAR but '"' and '\') or a quoted-pair of HTAB, SP or VCHAR.
_QUOTED: Final = r'"(?:[\t \x21\x23-\x5b\x5d-\x7e]|\\[\t \x21-\x7e])*"'
_ESSENCE_RE: Final = re.compile(rf"({_NAME})/({_NAME})")
_PARAMETER_RE: Final = re.compile(rf"[ \t]*;[ \t]*(?:({_TOKEN})=({_TOKEN}|{_QUOTED}))?[ \t]*")
_TOKEN_RE: Final = re.compile(_TOKEN)
_UNQUOTE_RE: Final = re.compile(r"\\(.)")


class MediaTypeError(ValueError):
    """A string that is not one media type; the message says what is wrong
    with it, in words a client can act on."""


@dataclass(frozen=True)
class MediaType:
    """One parsed media type: ``type`` and ``subtype`` lowercased, the
    parameters in order, names lowercased, values unquoted."""

    type: str
    subtype: str
    parameters: tuple[tuple[str, str], ...] = ()

    @property
    def essence(self) -> str:
        """``type/subtype``, without the parameters."""
        return f"{self.type}/{self.subtype}"

    def __str__(self) -> str:
        out = self.essence
        for name, value in self.parameters:
            if not _TOKEN_RE.fullmatch(value):
                value = '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
            out += f"; {name}={value}"
        return out


def parse_media_type(text: object) -> MediaType:
    """``text`` as a ``MediaType`` (the module docstring's grammar), or
    ``MediaTypeError`` saying what is wrong."""
    if not isinstance(text, str):
        raise MediaTypeError("a media type must be a string")
    if not text:
        raise MediaTypeError("the media type is empty")
    if len(text) > MAX_LENGTH:
        raise MediaTypeError(f"the media type is longer than {MAX_LENGTH} characters")
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in text):
        raise MediaTypeError("the media type holds a control character")
    if not text.isascii():
        raise MediaTypeError("the media type holds a character beyond ASCII")
    essence = _ESSENCE_RE.match(text)
    if essence is None:
        raise MediaTypeError(
            f"{text!r} is not a media type: it must start type/subtype, each a letter or digit "
            "followed by letters, digits or !#$&-^_.+"
        )
    parameters: list[tuple[str, str]] = []
    at = essence.end()
    while at < len(text):
        parameter = _PARAMETER_RE.match(text, at)
        if parameter is None or parameter.end() == at:
            raise MediaTypeError(
                f"{text!r} is not one media type: {text[at : at + 20]!r} follows {text[:at]!r} "
                "where only ;-separated name=value parameters may"
            )
        name, value = parameter.group(1), parameter.group(2)
        if name is not None:
            if value.startswith('"'):
                value = _UNQUOTE_RE.sub(r"\1", value[1:-1])
            parameters.append((name.lower(), value))
        at = parameter.end()
    parsed = MediaType(essence.group(1).lower(), essence.group(2).lower(), tuple(parameters))
    if len(str(parsed)) > MAX_LENGTH:  # written out with a space after each ';'
        raise MediaTypeError(f"the media type is longer than {MAX_LENGTH} characters")
    return parsed


def served_media_type(stored: str) -> MediaType | None:
    """A stored file's type as it may go in a ``Content-Type`` header, or
    None when it does not parse (a row stored before types were checked):
    the caller serves those as ``OCTET_STREAM``, and as a download."""
    try:
        return parse_media_type(stored)
    except MediaTypeError:
        return None
