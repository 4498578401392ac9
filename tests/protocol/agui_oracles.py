"""The other side's judges of an AG-UI stream, for the AG-UI tests.

* ``ag-ui-protocol`` 1.0.0 (PyPI, pydantic): the schema oracle. Every event
  must validate as its ``Event`` union member and dump back (camelCase,
  absent fields left out) to exactly what we sent.
* ``ag-ui-validate`` 0.4.0: the stream rules. Its field table was generated
  from ag-ui-protocol 0.1.21 and predates 1.0, so ``VALIDATE_EXCEPTIONS``
  lists each finding we set aside, and why. Every other finding of error
  or warning severity fails the test.
* ``AGUIVerifier`` (ours): the union of both clients' rules.

The TypeScript client judges the same streams in ``tests/js``.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterable
from typing import Any

from ag_ui.core import Event as PydanticEvent
from ag_ui_validate.pytest_plugin import validate_agui
from ag_ui_validate.types import Diagnostic
from pydantic import TypeAdapter

from uistream_app.protocol.agui.verifier import verify_events

_EVENT = TypeAdapter(PydanticEvent)

#: ag-ui-validate 0.4 findings that are not faults of a 1.0 stream, and why.
#: Keyed by rule; the predicate says which of its findings the reason covers.
VALIDATE_EXCEPTIONS: dict[str, tuple[str, Any]] = {
    "AGUI504": (
        "Its 0.4 field table types TOOL_CALL_RESULT.content as a string; AG-UI 1.0 also allows an array of "
        "content parts (text, image, audio, video, document). Only that finding is set aside. The renderer "
        "always sends a string; a hand-written agent may emit parts.",
        lambda d, events: (
            d.event_type == "TOOL_CALL_RESULT"
            and "'content' must be a string, got array" in d.message
            and isinstance(events[d.event_index].get("content"), list)
        ),
    ),
    "AGUI208": (
        "Info level, not a fault: a tool call with no text before it in its step gets a synthetic "
        "parentMessageId (<base>-tools-N, AG-UI renderer rule 6) so the step's calls share one assistant message; "
        "@ag-ui/client creates that message from TOOL_CALL_START. Listed because it shows in the report.",
        lambda d, events: d.severity == "info",
    ),
}


def pydantic_roundtrip(event: dict[str, Any]) -> None:
    """ag-ui-protocol validates ``event`` and dumps back exactly it."""
    model = _EVENT.validate_python(event)
    dumped = model.model_dump(by_alias=True, mode="json")
    assert dumped == event, f"ag-ui-protocol reads {event} as {dumped}"


def validate_findings(events: list[dict[str, Any]]) -> list[Diagnostic]:
    """ag-ui-validate's findings of error or warning severity, minus the
    documented exceptions."""
    report = validate_agui(events)
    assert not report.internal_errors, report.internal_errors
    findings = []
    for diagnostic in report.diagnostics:
        exception = VALIDATE_EXCEPTIONS.get(diagnostic.rule)
        if exception is not None and exception[1](diagnostic, events):
            continue
        if diagnostic.severity in ("error", "warning"):
            findings.append(diagnostic)
    return findings


def assert_accepted(events: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Our verifier, ag-ui-protocol and ag-ui-validate all accept the stream."""
    events = list(events)
    verify_events(events)
    for event in events:
        pydantic_roundtrip(event)
    findings = validate_findings(events)
    assert not findings, "\n".join(f"{d.rule} {d.severity} #{d.event_index}: {d.message}" for d in findings)
    return events


def agui_client(node: str, *args: str, timeout: float = 60) -> str:
    """Run ``tests/js/agui_client.mjs`` (the real ``@ag-ui/client``) with
    ``args``; its standard output. A failure shows the script's stderr."""
    from ..conftest import JS_DIR

    result = subprocess.run(
        [node, str(JS_DIR / "agui_client.mjs"), *args],
        capture_output=True,
        text=True,
        cwd=JS_DIR,
        timeout=timeout,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout
