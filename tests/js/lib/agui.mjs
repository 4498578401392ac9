// The real AG-UI 1.0 client (@ag-ui/client, @ag-ui/core) reading uistream's
// AG-UI streams: from bytes (fixtures) or from the live view (HttpAgent).
//
// readStream(bytes) runs the client's whole pipeline on the bytes, as
// HttpAgent.runAgent() does on a response: its SSE parser
// (transformHttpEventStream), the compatibility boundary, schema enforcement
// (which strips unknown material with a console warning), chunk expansion,
// verifyEvents, and the reducer that builds the messages. Every console
// warning it prints is collected: a clean stream causes none.

import { AbstractAgent, HttpAgent, buildResumeArray, transformHttpEventStream, verifyEvents } from '@ag-ui/client';
import { EventSchema } from '@ag-ui/core/schemas';
import { asyncScheduler, from, lastValueFrom, observeOn, of, toArray } from 'rxjs';

export const FIXED_TIMESTAMP = 1764460800000;

/** Split bytes at odd places, as a network would. */
export function pieces(bytes, size = 7) {
  const out = [];
  for (let at = 0; at < bytes.length; at += size) out.push(bytes.subarray(at, at + size));
  return out;
}

class BytesAgent extends AbstractAgent {
  constructor(bytes, config) {
    super(config);
    this.bytes = bytes;
  }

  run() {
    const http$ = from([
      { type: 'headers', status: 200, headers: new Headers({ 'content-type': 'text/event-stream' }) },
      ...pieces(new Uint8Array(this.bytes)).map(data => ({ type: 'data', data })),
      // Asynchronous, as a response body is: the client subscribes to the
      // transport before the rest of its pipeline is in place.
    ]).pipe(observeOn(asyncScheduler));
    return transformHttpEventStream(http$);
  }
}

/** Collect console.warn calls made while `fn` runs. */
export async function collectingWarnings(fn) {
  const warnings = [];
  const original = console.warn;
  console.warn = (...args) => warnings.push(args.map(String).join(' '));
  try {
    const value = await fn();
    return { value, warnings };
  } finally {
    console.warn = original;
  }
}

function recorder() {
  const seen = { events: [], finished: null, runError: null, failed: null };
  const subscriber = {
    onEvent({ event }) {
      seen.events.push(event);
    },
    onRunFinishedEvent(params) {
      seen.finished = { outcome: params.outcome, interrupts: params.interrupts, pendingToolCallIds: params.pendingToolCallIds };
    },
    onRunErrorEvent({ event }) {
      seen.runError = { message: event.message, code: event.code };
    },
    onRunFailed({ error }) {
      seen.failed = error.message;
    },
  };
  return { seen, subscriber };
}

/** The real client's reading of one AG-UI response body. */
export async function readStream(bytes, { threadId = 'thread-1' } = {}) {
  const agent = new BytesAgent(bytes, { threadId });
  const { seen, subscriber } = recorder();
  const { value, warnings } = await collectingWarnings(async () => {
    try {
      const { newMessages } = await agent.runAgent({ runId: 'run-1' }, subscriber);
      return { newMessages, error: null };
    } catch (error) {
      return { newMessages: agent.messages, error: error.message };
    }
  });
  return { ...seen, ...value, warnings, messages: JSON.parse(JSON.stringify(agent.messages)), state: agent.state ?? null };
}

/** Events parsed from SSE bytes with the same framing rules the client uses. */
export function sseEvents(bytes) {
  const text = new TextDecoder().decode(bytes);
  return text
    .split('\n\n')
    .filter(block => block.length > 0)
    .map(block =>
      JSON.parse(
        block
          .split('\n')
          .filter(line => line.startsWith('data:'))
          .map(line => line.slice(5).replace(/^ /, ''))
          .join('\n'),
      ),
    );
}

/** verifyEvents alone over a list of events: resolves, or rejects with its error. */
export function verify(events) {
  return lastValueFrom(from(events).pipe(verifyEvents(), toArray()));
}

/** @ag-ui/core's schema for each event; returns the parsed events. */
export function parseAll(events) {
  return events.map(event => EventSchema.parse(event));
}

/** A live HttpAgent with a browser-like cookie jar and the CSRF header. */
export function httpAgent({ url, threadId, cookie, csrf, initialMessages }) {
  const jar = new Map(
    (cookie ?? '')
      .split('; ')
      .filter(Boolean)
      .map(pair => {
        const at = pair.indexOf('=');
        return [pair.slice(0, at), pair.slice(at + 1)];
      }),
  );
  const fetchWithCookies = async (input, init = {}) => {
    const headers = new Headers(init.headers);
    if (jar.size) headers.set('cookie', [...jar].map(([k, v]) => `${k}=${v}`).join('; '));
    const response = await fetch(input, { ...init, headers });
    for (const line of response.headers.getSetCookie()) {
      const [pair] = line.split(';');
      const at = pair.indexOf('=');
      jar.set(pair.slice(0, at).trim(), pair.slice(at + 1));
    }
    return response;
  };
  const headers = csrf ? { 'X-CSRFToken': csrf } : {};
  return new HttpAgent({ url, threadId, headers, fetch: fetchWithCookies, initialMessages: initialMessages ?? [] });
}

/**
 * One live run, and what was seen. What the run sends, as an application
 * would: `text` adds a user message; `answers` answers the agent's pending
 * interrupts in order (each `{approved, reason?}` is a resolved payload,
 * `"cancel"` cancels), through the client's own buildResumeArray;
 * `clientTools` ({toolName: output}) adds a tool message for each call the
 * previous run left pending (`pending`: its pendingToolCallIds).
 */
export async function liveRun(agent, { text, messageId, runId, parameters = {}, answers, clientTools, pending = [] }) {
  if (text !== undefined) agent.addMessage({ id: messageId, role: 'user', content: text });
  if (clientTools !== undefined) {
    const names = new Map(agent.messages.flatMap(m => (m.toolCalls ?? []).map(c => [c.id, c.function.name])));
    for (const toolCallId of pending) {
      const output = clientTools[names.get(toolCallId)];
      if (output === undefined) throw new Error(`no client result for ${names.get(toolCallId)} (${toolCallId})`);
      agent.addMessage({ id: `${toolCallId}-answer`, role: 'tool', toolCallId, content: JSON.stringify(output) });
    }
  }
  if (answers !== undefined) {
    const open = agent.pendingInterrupts;
    if (open.length !== answers.length) throw new Error(`${open.length} open interrupts, ${answers.length} answers`);
    const responses = Object.fromEntries(
      open.map((interrupt, i) => [
        interrupt.id,
        answers[i] === 'cancel' ? { status: 'cancelled' } : { status: 'resolved', payload: answers[i] },
      ]),
    );
    parameters = { ...parameters, resume: buildResumeArray(open, responses) };
  }
  const { seen, subscriber } = recorder();
  const { value, warnings } = await collectingWarnings(async () => {
    try {
      const { newMessages } = await agent.runAgent({ runId, ...parameters }, subscriber);
      return { newMessages, error: null };
    } catch (error) {
      return { newMessages: [], error: error.message };
    }
  });
  return {
    ...seen,
    ...value,
    warnings,
    pendingInterrupts: JSON.parse(JSON.stringify(agent.pendingInterrupts)),
    // What the agent holds once this run is over (the next run sends it).
    messages: JSON.parse(JSON.stringify(agent.messages)),
    state: JSON.parse(JSON.stringify(agent.state ?? null)),
  };
}

export { of };
