#!/usr/bin/env node
// Read every *.sse file of a directory with a real ai client.
//
//   node check_streams.mjs DIR [--version 5|6|7]      (default: 7)
//
// For each file, in name order, it writes one JSON line to stdout (U+0085,
// U+2028 and U+2029 escaped, so that any line splitter, Python's
// str.splitlines included, sees one line per file):
//
//   {"file": "DIR/0001.sse", "ok": true, "message": {...}, "error": null,
//    "errorKind": null, "chunks": 14, "updates": 12, "done": true}
//
// - ok: the client accepted the stream: every chunk passed its
//   uiMessageChunkSchema and readUIMessageStream (terminateOnError: true)
//   applied them all. A stream that carries an `error` chunk is ok.
// - message: the UIMessage as the client's streaming state holds it at the
//   end (what useChat's onFinish gets; JSON.parse(JSON.stringify(msg))), null
//   when no chunk reached the client. See lib/sdk.mjs.
// - error: the errorText of the stream's `error` chunk, or what the client
//   rejected (then ok is false); null when neither.
// - errorKind: null | "error-chunk" | "schema" | "stream"; chunks: how many
//   chunks reached the client; updates: how many snapshots readUIMessageStream
//   yielded; done: the file ends with `data: [DONE]\n\n`.
//
// The exit status is 0 whatever the streams hold, unless the script itself
// fails (1) or is called wrongly (2). tests/protocol/test_properties.py
// compares each line with what our Python reader builds from the same file.

import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { DONE_FRAME, jsonLine, readSse, SDKS } from './lib/sdk.mjs';

const USAGE = 'usage: node check_streams.mjs DIR [--version 5|6|7]';

function parseArgs(argv) {
  let version = 7;
  const rest = [];
  for (let i = 0; i < argv.length; i += 1) {
    if (argv[i] === '--version') {
      version = Number(argv[(i += 1)]);
    } else if (argv[i].startsWith('--version=')) {
      version = Number(argv[i].slice('--version='.length));
    } else {
      rest.push(argv[i]);
    }
  }
  return rest.length === 1 && version in SDKS ? { dir: rest[0], version } : null;
}

async function main(argv) {
  const args = parseArgs(argv);
  if (args == null) {
    process.stderr.write(`${USAGE}\n`);
    return 2;
  }
  const names = readdirSync(args.dir)
    .filter(name => name.endsWith('.sse'))
    .sort();
  for (const name of names) {
    const file = join(args.dir, name);
    const bytes = readFileSync(file);
    const result = await readSse(args.version, bytes);
    const done = bytes.toString('utf8').endsWith(DONE_FRAME);
    process.stdout.write(jsonLine({ file, ...result, done }));
  }
  return 0;
}

process.exitCode = await main(process.argv.slice(2));
