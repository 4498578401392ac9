#!/usr/bin/env node
// The UIMessage a real ai@VERSION client builds from one .sse file.
//
//   node build_message.mjs VERSION FILE.sse [--message-only]
//
// VERSION is 5, 6 or 7 (the pinned packages ai5/ai6/ai7 of package.json).
// The fixture regeneration (tests/ui_fixtures.py) writes message.json from
// this, so the golden messages come from the SDK itself, never from our
// Python reader.
//
// Output (stdout), one JSON object on one line (U+0085, U+2028 and U+2029
// escaped as \uXXXX, so it stays one line for any line splitter):
//
//   {"version": 7, "file": "FILE.sse",
//    "ok": true,              // the client accepted the stream (an in-band
//                             //   `error` chunk is still a valid stream)
//    "message": {...},        // the UIMessage as the client's streaming state
//                             //   holds it at the end (what useChat's onFinish
//                             //   gets), JSON.parse(JSON.stringify(msg)); null
//                             //   if no chunk reached the client
//    "error": null,           // the errorText of an `error` chunk, or what
//                             //   the client rejected; null when none
//    "errorKind": null,       // null | "error-chunk" | "schema" | "stream"
//    "chunks": 12,            // chunks that reached the client
//    "updates": 10,           // snapshots readUIMessageStream yielded
//    "done": true}            // the file ends with `data: [DONE]\n\n`
//
// How the message is read (and why it is the state, not the last snapshot):
// lib/sdk.mjs.
//
// With --message-only it prints just the message, indented by 2 spaces, for
// redirecting into a message.json.
//
// Exit status: 0 when ok; 1 when the client rejected the stream (a chunk
// failed its schema, or applying one threw) or the script failed; the JSON
// is still printed for a rejected stream. 2 for a usage error.

import { readFileSync } from 'node:fs';
import { DONE_FRAME, jsonLine, readSse, SDKS } from './lib/sdk.mjs';

const USAGE = 'usage: node build_message.mjs VERSION FILE.sse [--message-only]';

async function main(argv) {
  const flags = argv.filter(arg => arg.startsWith('--'));
  const args = argv.filter(arg => !arg.startsWith('--'));
  const unknown = flags.filter(flag => flag !== '--message-only');
  if (args.length !== 2 || unknown.length > 0 || !(args[0] in SDKS)) {
    process.stderr.write(`${USAGE}\n`);
    return 2;
  }
  const version = Number(args[0]);
  const file = args[1];
  const bytes = readFileSync(file);
  const result = await readSse(version, bytes);
  if (flags.includes('--message-only')) {
    process.stdout.write(`${JSON.stringify(result.message, null, 2)}\n`);
  } else {
    const done = bytes.toString('utf8').endsWith(DONE_FRAME);
    process.stdout.write(jsonLine({ version, file, ...result, done }));
  }
  if (!result.ok) {
    process.stderr.write(`ai@${version} rejected ${file}: ${result.error}\n`);
    return 1;
  }
  return 0;
}

process.exitCode = await main(process.argv.slice(2));
