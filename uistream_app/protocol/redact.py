"""Credentials taken out of text before it is stored or logged.

A provider that answers an error may echo the request it got, its
``Authorization`` header and the key in it included; an exception's text
may carry a URL with a ``key=``. ``redact`` replaces, with ``REDACTED``:

1. the value of a credential header or field, in a header line, JSON or a
   Python ``repr`` (``Authorization``, ``Proxy-Authorization``,
   ``x-api-key``, ``api-key``, ``x-goog-api-key``, ``Cookie``,
   ``Set-Cookie``, ``api_key``, ``access_token``, ``client_secret``,
   ``password``), up to its closing quote or the end of the line;
2. a ``Bearer`` or ``Basic`` credential wherever it stands;
3. tokens shaped like a provider's key (``sk-…``, ``sk-ant-…``,
   ``sk-proj-…``, Google's ``AIza…``, GitHub's ``ghp_…``);
4. a long value after ``key=``, ``token=``, ``secret=`` (a query string);
5. the values of the keys the process is configured with: every
   environment variable whose name ends in ``_API_KEY``, ``_TOKEN``,
   ``_SECRET`` or ``_SECRET_KEY`` (``OPENAI_API_KEY``,
   ``ANTHROPIC_API_KEY``, ``OPENAI_COMPATIBLE_API_KEY``, the ones
   ``runs.providers`` reads), and any ``secrets`` the caller passes (a
   model's own ``api_key``), wherever they appear.

Rules 1-4 work without knowing the key; rule 5 catches a key echoed in a
shape the patterns do not know. The text keeps everything else (the
status, the provider's message), so an operator still reads why a call
failed. Values shorter than 8 characters are left alone by rule 5: they
are no key, and replacing them would garble the text.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from typing import Final

__all__ = ["REDACTED", "configured_secrets", "redact"]

REDACTED: Final = "[redacted]"

_HEADER_NAMES: Final = (
    r"proxy-authorization|authorization|x-api-key|x-goog-api-key|api-key|set-cookie|cookie"
    r"|api_key|apikey|access_token|refresh_token|client_secret|password"
)
# The name, quoted or not, then ':' or '=', then the value: a quoted string
# (JSON's, with its escapes, or a repr's), else the rest of the line.
_FIELD: Final = re.compile(
    rf"""(?P<name>(?P<q>\\?["']?)\b(?:{_HEADER_NAMES})\b(?P=q)\s*[:=]\s*)"""
    r"""(?:(?P<dq>\\?")(?:(?!(?P=dq)).)*(?P=dq)|'[^'\r\n]*'|[^\r\n,}&\]]*)""",
    re.IGNORECASE,
)
_SCHEME: Final = re.compile(r"\b(?P<scheme>bearer|basic)\s+[A-Za-z0-9._~+/=-]{6,}", re.IGNORECASE)
_KEY_SHAPED: Final = re.compile(
    r"\bsk-(?:ant-|proj-)?[A-Za-z0-9_-]{16,}|\bAIza[0-9A-Za-z_-]{30,}|\bgh[pousr]_[A-Za-z0-9]{30,}"
)
_QUERY: Final = re.compile(r"(?P<name>\b(?:[A-Za-z_-]*key|[A-Za-z_-]*token|secret)=)[^\s&\"',;]{12,}", re.IGNORECASE)
_SECRET_NAME: Final = re.compile(r"(?:_API_KEY|_TOKEN|_SECRET|_SECRET_KEY)$")
_MIN_SECRET: Final = 8


def configured_secrets(environ: Mapping[str, str] | None = None) -> list[str]:
    """The values of the environment's credential variables (rule 5 of the
    module docstring), longest first."""
    env = os.environ if environ is None else environ
    found = {value for name, value in env.items() if _SECRET_NAME.search(name.upper()) and len(value) >= _MIN_SECRET}
    return sorted(found, key=len, reverse=True)


def _field(match: re.Match[str]) -> str:
    value = match.group(0)[len(match.group("name")) :]
    if not value.strip():
        return match.group(0)
    quote = match.group("dq") or (value[0] if value[0] == "'" else "")
    return f"{match.group('name')}{quote}{REDACTED}{quote}"


def redact(text: str, secrets: Iterable[str | None] = ()) -> str:
    """``text`` with every credential the module docstring lists replaced
    by ``REDACTED``: the patterns, the configured keys and ``secrets``."""
    if not text:
        return text
    for secret in sorted({s for s in (*secrets, *configured_secrets()) if s and len(s) >= _MIN_SECRET}, key=len)[::-1]:
        text = text.replace(secret, REDACTED)
    text = _FIELD.sub(_field, text)
    text = _SCHEME.sub(lambda m: f"{m.group('scheme')} {REDACTED}", text)
    text = _KEY_SHAPED.sub(REDACTED, text)
    return _QUERY.sub(lambda m: f"{m.group('name')}{REDACTED}", text)
