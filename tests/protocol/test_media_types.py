"""``protocol.media_types``: what parses, its normalised form, and what is
refused with which reason (RFC 6838 names, RFC 9110 parameters)."""

from __future__ import annotations

import pytest

from uistream_app.protocol.media_types import MediaTypeError, parse_media_type, served_media_type


@pytest.mark.parametrize(
    ("text", "normalised"),
    [
        ("image/png", "image/png"),
        ("IMAGE/PNG", "image/png"),
        ("image/svg+xml", "image/svg+xml"),
        ("application/vnd.ms-excel", "application/vnd.ms-excel"),
        ("text/plain;charset=UTF-8", "text/plain; charset=UTF-8"),
        ("text/plain ; Charset=utf-8 ;format=flowed", "text/plain; charset=utf-8; format=flowed"),
        ('text/plain; charset="utf-8"', "text/plain; charset=utf-8"),
        ('multipart/mixed; boundary="a b\\"c"', 'multipart/mixed; boundary="a b\\"c"'),
        ("image/png;", "image/png"),
    ],
)
def test_a_media_type_parses_to_its_normalised_form(text: str, normalised: str) -> None:
    parsed = parse_media_type(text)
    assert str(parsed) == normalised
    assert str(parse_media_type(normalised)) == normalised  # the normalised form is a fixed point


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("image/png\r\nX-Injected: 1", "control character"),
        ("image/png\x00", "control character"),
        ("image/svg+xml,x", "',x' follows 'image/svg+xml'"),
        ("image/png, text/html", "', text/html' follows 'image/png'"),
        ("image/png text/html", "' text/html' follows"),
        (" image/png", "must start type/subtype"),
        ("image/png ", "' ' follows"),
        ("image", "must start type/subtype"),
        ("image/", "must start type/subtype"),
        ("/png", "must start type/subtype"),
        ("*/*", "must start type/subtype"),
        ("image/*", "must start type/subtype"),
        ("text/plain; charset", "follows"),
        ("text/plain; charset=", "follows"),
        ('text/plain; charset="utf-8', "follows"),
        ("text/plain; a b=c", "follows"),
        ("image/pngé", "beyond ASCII"),
        ("", "empty"),
        ("a/" + "b" * 300, "longer than 255"),
    ],
)
def test_anything_else_is_refused_saying_why(text: str, reason: str) -> None:
    with pytest.raises(MediaTypeError) as refused:
        parse_media_type(text)
    assert reason in str(refused.value)


def test_a_type_that_does_not_parse_is_served_as_none() -> None:
    assert served_media_type("image/png, text/html") is None
    parsed = served_media_type("Image/PNG")
    assert parsed is not None
    assert parsed.essence == "image/png"
