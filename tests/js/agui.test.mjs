// The golden AG-UI streams, read by the real AG-UI 1.0 client.
//
//   cd tests/js && node --test
//
// Every directory under fixtures/ag-ui/ (from the repo root) is one fixture
// (tests/agui_fixtures.py writes them). For each:
// * stream.sse uses only \n line ends and ends with its blank line;
// * every event passes @ag-ui/core's own schema (EventSchema from
//   @ag-ui/core/schemas) and comes back from it unchanged: nothing unknown,
//   nothing the schema would coerce;
// * @ag-ui/client's verifyEvents accepts the whole stream;
// * the client's full pipeline (its SSE parser, compatibility boundary,
//   schema enforcement, chunk expansion, verification and reducer, as
//   HttpAgent.runAgent() runs them, bytes split at odd places) reads it
//   without a single console warning, builds messages.json, and ends the run
//   as scenario.json says: RUN_FINISHED with the expected outcome, or
//   RUN_ERROR with the expected message;
// * handles.jsonl (hand-written agents), the events the emit handles sent
//   before the canonical log, passes the schema and verifyEvents too.
// Two controls prove the checks bite: verifyEvents refuses content for a
// message never started, and the schema refuses `role: null`.
//
// The live HttpAgent runs against the view are driven from pytest
// (tests/test_agui_http.py through agui_client.mjs), which starts the server.

import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { EventSchema } from '@ag-ui/core/schemas';
import { parseAll, readStream, sseEvents, verify } from './lib/agui.mjs';

const FIXTURES = fileURLToPath(new URL('../../fixtures/ag-ui/', import.meta.url));

function readJson(path) {
  return JSON.parse(readFileSync(path, 'utf8'));
}

const names = existsSync(FIXTURES)
  ? readdirSync(FIXTURES, { withFileTypes: true })
      .filter(entry => entry.isDirectory())
      .map(entry => entry.name)
      .sort()
  : [];

if (names.length === 0) {
  test('AG-UI fixtures', { skip: `no fixtures yet under ${FIXTURES}` }, () => {});
}

for (const name of names) {
  const dir = join(FIXTURES, name);
  const scenario = readJson(join(dir, 'scenario.json'));
  const bytes = readFileSync(join(dir, 'stream.sse'));
  const events = sseEvents(bytes);

  describe(`ag-ui ${name}`, () => {
    test('framing: \\n line ends only, every event closed by its blank line', () => {
      assert.ok(!bytes.includes(0x0d), 'no CR');
      assert.ok(bytes.toString('utf8').endsWith('\n\n'));
      assert.ok(events.length >= 2);
      for (const event of events) assert.equal(typeof event.timestamp, 'number');
    });

    test('@ag-ui/core: every event passes EventSchema unchanged', () => {
      assert.deepEqual(parseAll(events), events);
    });

    test('@ag-ui/client: verifyEvents accepts the stream', async () => {
      const verified = await verify(events);
      assert.equal(verified.length, events.length);
    });

    test('@ag-ui/client: runAgent() reads it cleanly and builds messages.json', async () => {
      const out = await readStream(bytes);
      assert.deepEqual(out.warnings, []);
      assert.equal(out.error, null);
      assert.equal(out.failed, null);
      assert.equal(out.events.length, events.length);
      assert.deepEqual(out.newMessages, readJson(join(dir, 'messages.json')));
      if (scenario.expect_error !== undefined) {
        assert.equal(out.finished, null);
        assert.equal(out.runError.message, scenario.expect_error);
      } else {
        assert.equal(out.runError, null);
        assert.equal(out.finished.outcome, scenario.expect_outcome);
      }
    });

    const handlesPath = join(dir, 'handles.jsonl');
    if (existsSync(handlesPath)) {
      test('the emit handles sent a stream the client accepts too', async () => {
        const handleEvents = readFileSync(handlesPath, 'utf8').split('\n').filter(Boolean).map(JSON.parse);
        assert.deepEqual(parseAll(handleEvents), handleEvents);
        await verify(handleEvents);
      });
    }
  });
}

describe('ag-ui controls: the checks bite', () => {
  test('verifyEvents refuses content for a message never started', async () => {
    const broken = [
      { type: 'RUN_STARTED', threadId: 't', runId: 'r' },
      { type: 'TEXT_MESSAGE_CONTENT', messageId: 'm', delta: 'x' },
    ];
    await assert.rejects(verify(broken), /No active text message/);
  });

  test('verifyEvents refuses RUN_FINISHED while a tool call is open', async () => {
    const broken = [
      { type: 'RUN_STARTED', threadId: 't', runId: 'r' },
      { type: 'TOOL_CALL_START', toolCallId: 'c', toolCallName: 'f' },
      { type: 'RUN_FINISHED', threadId: 't', runId: 'r' },
    ];
    await assert.rejects(verify(broken), /tool calls are still active/);
  });

  test('the schema refuses role: null (a producer must leave it out)', () => {
    assert.throws(() => EventSchema.parse({ type: 'TEXT_MESSAGE_START', messageId: 'm', role: null }));
  });
});
