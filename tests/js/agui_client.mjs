#!/usr/bin/env node
// The real AG-UI 1.0 client (@ag-ui/client) as a command line, for pytest and
// the fixture generator.
//
//   node agui_client.mjs read <stream.sse>
//     The client's whole pipeline over the bytes (lib/agui.mjs readStream).
//     Prints {newMessages, messages, events, finished, runError, error, warnings, state}.
//
//   node agui_client.mjs read-dir <dir>
//     The same for every *.sse file of <dir>, one JSON line each ({file, ...}).
//
//   node agui_client.mjs run '<json>'
//     A real HttpAgent against a live server. <json>: {"url", "threadId",
//     "cookie", "csrf", "runs": [{"text"?, "messageId"?, "runId", "tools"?,
//     "context"?, "forwardedProps"?, "state"?, "answers"?, "clientTools"?}]}:
//     a run with "text" sends a user message; "answers" resumes the open
//     interrupts ([{approved, reason?} | "cancel"], in order), "clientTools"
//     ({toolName: output}) answers the client-side calls the previous run
//     left pending (lib/agui.mjs liveRun). The agent keeps its messages
//     across runs, as a browser's would. Prints {runs: [{newMessages, events,
//     finished, runError, error, warnings, pendingInterrupts, messages: the
//     agent's messages after that run, state: its state after that run}], messages: the agent's messages
//     after the last run, state}.

import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { httpAgent, liveRun, readStream } from './lib/agui.mjs';

async function main() {
  const [mode, arg] = process.argv.slice(2);
  if (mode === 'read') {
    const out = await readStream(readFileSync(arg));
    process.stdout.write(JSON.stringify(out) + '\n');
    return;
  }
  if (mode === 'read-dir') {
    for (const name of readdirSync(arg).filter(n => n.endsWith('.sse')).sort()) {
      const out = await readStream(readFileSync(join(arg, name)));
      process.stdout.write(JSON.stringify({ file: name, ...out }) + '\n');
    }
    return;
  }
  if (mode === 'run') {
    const options = JSON.parse(arg);
    const agent = httpAgent(options);
    const runs = [];
    for (const run of options.runs) {
      if (run.state !== undefined) agent.setState(run.state);
      const parameters = {};
      for (const key of ['tools', 'context', 'forwardedProps']) if (run[key] !== undefined) parameters[key] = run[key];
      const pending = runs.at(-1)?.finished?.pendingToolCallIds ?? [];
      runs.push(await liveRun(agent, { ...run, parameters, pending }));
    }
    const result = { runs, messages: JSON.parse(JSON.stringify(agent.messages)), state: agent.state };
    process.stdout.write(JSON.stringify(result) + '\n');
    return;
  }
  throw new Error(`usage: agui_client.mjs read <file> | read-dir <dir> | run '<json>'`);
}

main().catch(error => {
  process.stderr.write(String(error?.stack ?? error) + '\n');
  process.exit(1);
});
