"""A project's own tests of its chat view, written the way Django's
documentation shows them: a ``TestCase`` (each test in a transaction that is
rolled back) and its async test client. The run's log and stored message
must be written inside that transaction, where the test reads them, not
through a connection of their own that cannot see the rows the request made
(``UISTREAM["LOG_WRITER"] = "auto"``, the default: inline under a test
runner). The rest of the suite runs the writer's own thread, as servers do.
"""

from __future__ import annotations

import json
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.test import TestCase, override_settings

from uistream_app.models import Message, Run
from uistream_app.protocol.sse import SSEParser
from uistream_app.recording import read_log

#: The default; the suite's settings choose "thread".
WRITER = "auto"


class ChatViewInATestCase(TestCase):
    async def chat(self, chat_id: str, text: str) -> list[dict[str, Any]]:
        body = {
            "id": chat_id,
            "trigger": "submit-message",
            "messages": [{"id": f"{chat_id}-u1", "role": "user", "parts": [{"type": "text", "text": text}]}],
        }
        with override_settings(UISTREAM={**settings.UISTREAM, "LOG_WRITER": WRITER}):
            response = await self.async_client.post("/api/chat", json.dumps(body), content_type="application/json")
            assert response.status_code == 200
            raw = b"".join([part async for part in response.streaming_content])
        return [json.loads(e.data) for e in SSEParser().feed(raw) if e.data != "[DONE]"]

    async def test_the_stored_run_is_visible_to_the_test(self) -> None:
        chunks = await self.chat("tc-1", "count to 3")
        message = await Message.objects.aget(pk=chunks[0]["messageId"])
        run = await Run.objects.aget(message=message)
        assert run.status == "completed"
        assert run.chunk_count == len(chunks)
        assert [p["text"] for p in message.parts if p["type"] == "text"] == ["1 2 3"]
        stored = await sync_to_async(read_log)(run)
        assert [entry.chunk for entry in stored] == chunks
