#!/usr/bin/env node
// The UIMessages a real ai@7 client builds from many chunk logs, in one
// process (bench/chaos.py checks every stored message of a soak round with
// one call).
//
//   node build_messages.mjs < items.jsonl > built.jsonl
//
// Each input line is one JSON object:
//
//   {"key": "...",            // echoed back
//    "chunks": [...],         // ai@7 UI message chunks, in order (a run's log)
//    "message": {...} | null} // the assistant message the stream continues
//                             //   (what useChat holds before a continuation:
//                             //   the stored message with the person's
//                             //   approval applied), or null for a new one
//
// Each output line, in input order: {"key", "ok", "message", "error",
// "errorKind", "chunks", "updates"}, as build_message.mjs and lib/sdk.mjs's
// readSse describe them (the chunks are framed as the SSE the server sends,
// so the SDK's own parser and chunk schema read them). Lines are escaped as
// jsonLine does. Exit status 0 unless the script itself fails (1).

import { createInterface } from 'node:readline';
import { DONE_FRAME, jsonLine, readSse } from './lib/sdk.mjs';

function sse(chunks) {
  return Buffer.from(chunks.map(chunk => `data: ${JSON.stringify(chunk)}\n\n`).join('') + DONE_FRAME);
}

const lines = createInterface({ input: process.stdin, crlfDelay: Infinity });
for await (const line of lines) {
  if (!line.trim()) continue;
  const item = JSON.parse(line);
  const result = await readSse(7, sse(item.chunks), { message: item.message ?? null });
  process.stdout.write(jsonLine({ key: item.key, ...result }));
}
