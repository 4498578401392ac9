// Read a UI message stream (.sse bytes) the way a real `ai` client does.
//
// The pipeline is the one DefaultChatTransport + useChat run in the browser:
//   parseJsonEventStream({stream, schema: uiMessageChunkSchema})  (per version)
//   → a chunk that fails the schema is an error (the transport throws it)
//   → readUIMessageStream({message, stream, terminateOnError: true})
// and "the message the client built" is the SDK's own streaming state when
// the stream is over: what useChat's onFinish receives and what a server
// stores. Three details:
// * That state is read, not rebuilt: readUIMessageStream continues the
//   assistant `message` it is given, in place, so we hand it a fresh one
//   shaped like createStreamingUIMessageState's ({id, metadata: undefined,
//   role, parts: []}) and name it after the stream's first `start.messageId`
//   just before the SDK sees that chunk (otherwise it would start another
//   object). The snapshots it yields lag the state: `start-step` adds a part
//   without an update. Only when a later `start` names another message does
//   the SDK switch objects; then the last snapshot is the answer.
// * An `error` chunk ends the read, as in useChat (its onError rethrows and
//   stops the stream); readUIMessageStream alone would go on applying chunks.
// * Errors reach us through readUIMessageStream's output stream, and erroring
//   a ReadableStream discards what is still queued in it, so every chunk is
//   handed on only after a macrotask turn: all work on the previous chunk
//   (microtasks) is done by then, which makes the result deterministic.
// Messages are normalised with JSON.parse(JSON.stringify(...)), as they would
// be stored or sent back: `undefined` fields disappear.

import * as ai5 from 'ai5';
import * as ai6 from 'ai6';
import * as ai7 from 'ai7';

/** The pinned clients, by major version. */
export const SDKS = Object.freeze({ 5: ai5, 6: ai6, 7: ai7 });

/** The last release of each major whose chunk schema rejects unknown keys
 * (z.strictObject until "Allow UI message chunks to include fields added by
 * newer server versions": 7.0.32, 6.0.231, 5.0.217). */
export const STRICT_RELEASES = Object.freeze({ 5: '5.0.216', 6: '6.0.230', 7: '7.0.31' });

const strictModules = {};

/** The strict release of major `version` (package alias `ai{N}-strict`). */
export async function strictSdk(version) {
  strictModules[version] ??= await import(`ai${version}-strict`);
  return strictModules[version];
}

export const DONE_FRAME = 'data: [DONE]\n\n';

/** A chunk the client's uiMessageChunkSchema rejects. */
export class SchemaError extends Error {
  constructor(index, raw, cause) {
    super(`chunk ${index} fails the schema: ${raw}\n${describeCause(cause)}`);
    this.name = 'SchemaError';
    this.index = index;
    this.raw = raw;
  }
}

function describeCause(cause) {
  const issues = cause?.cause?.issues ?? cause?.issues;
  if (!Array.isArray(issues)) return `  ${cause?.message ?? cause}`;
  return issues.flatMap(explainIssue).join('\n');
}

// zod reports a chunk that fits no member of the union as one invalid_union
// issue holding every member's issues; the member for the chunk's own `type`
// is the one whose issues do not include the `type` field.
function explainIssue(issue) {
  if (issue.code === 'invalid_union' && Array.isArray(issue.errors)) {
    const sameType = issue.errors.filter(member => !member.some(i => i.path?.length === 1 && i.path[0] === 'type'));
    if (sameType.length === 0) return ['  unknown chunk type'];
    return sameType.flat().flatMap(explainIssue);
  }
  const where = issue.path?.length ? ` at ${issue.path.join('.')}` : '';
  return [`  ${issue.code}${where}: ${issue.message}`];
}

function byteStream(bytes) {
  return new Blob([bytes]).stream();
}

const nextMacrotask = () => new Promise(resolve => setImmediate(resolve));

/**
 * Parse `bytes` with `sdk`'s own parser and schema. Resolves to
 * `{chunks, schemaErrors}`: every chunk the schema accepted, in order, and a
 * SchemaError for each one it rejected (reading goes on past a rejection).
 */
export async function parseChunks(sdk, bytes) {
  const chunks = [];
  const schemaErrors = [];
  let index = 0;
  const parsed = sdk.parseJsonEventStream({ stream: byteStream(bytes), schema: sdk.uiMessageChunkSchema });
  for await (const result of parsed) {
    if (result.success) {
      chunks.push(result.value);
    } else {
      schemaErrors.push(new SchemaError(index, JSON.stringify(result.rawValue), result.error));
    }
    index += 1;
  }
  return { chunks, schemaErrors };
}

/**
 * What the ai@`version` client builds from `bytes`.
 *
 * `message`, when given, is the assistant message the stream continues.
 *
 * Resolves to `{ok, message, error, errorKind, chunks, updates}`:
 * - `message`: the UIMessage as the client's streaming state holds it at the
 *   end (normalised), or null when no chunk reached the client;
 * - `errorKind`: null; "error-chunk" (the stream carries an `error` chunk:
 *   `error` is its errorText); "schema" (a chunk fails the version's
 *   schema); "stream" (the client threw while applying a chunk, e.g.
 *   UIMessageStreamError for a delta of a part never started);
 * - `ok`: the client accepted the stream (no "schema"/"stream" error; an
 *   in-band `error` chunk is a valid stream);
 * - `chunks`: how many chunks reached the client;
 * - `updates`: how many message snapshots readUIMessageStream yielded (0: a
 *   useChat page would not have shown this message at all).
 */
export async function readSse(version, bytes, { sdk = SDKS[version], message: continued = null } = {}) {
  if (sdk == null) throw new Error(`no ai client for version ${version}`);
  // `message`: the assistant message the stream continues (useChat hands
  // its last message to the stream of a continuation, e.g. after an approval).
  const state = continued != null ? structuredClone(continued) : { id: '', metadata: undefined, role: 'assistant', parts: [] };
  let index = 0;
  let named = false;
  let errorChunkText = null;
  const chunks = sdk
    .parseJsonEventStream({ stream: byteStream(bytes), schema: sdk.uiMessageChunkSchema })
    .pipeThrough(
      new TransformStream({
        async transform(result, controller) {
          await nextMacrotask();
          if (errorChunkText != null) return;
          if (!result.success) {
            throw new SchemaError(index, JSON.stringify(result.rawValue), result.error);
          }
          const chunk = result.value;
          if (chunk.type === 'start' && !named) {
            named = true;
            if (chunk.messageId != null) state.id = chunk.messageId;
          } else if (chunk.type === 'error') {
            errorChunkText = chunk.errorText;
          }
          index += 1;
          controller.enqueue(chunk);
        },
      }),
    );

  let last = null;
  let updates = 0;
  let error = null;
  let errorKind = null;
  try {
    for await (const snapshot of sdk.readUIMessageStream({ message: state, stream: chunks, terminateOnError: true })) {
      last = snapshot;
      updates += 1;
    }
  } catch (caught) {
    if (caught instanceof SchemaError) {
      errorKind = 'schema';
    } else if (errorChunkText != null && caught?.message === errorChunkText) {
      errorKind = 'error-chunk';
    } else {
      errorKind = 'stream';
    }
    error = errorKind === 'error-chunk' ? errorChunkText : describeError(caught);
  }
  const final = last != null && last.id !== state.id ? last : state;
  const message = index === 0 ? null : JSON.parse(JSON.stringify(final));
  return { ok: errorKind == null || errorKind === 'error-chunk', message, error, errorKind, chunks: index, updates };
}

/** `value` as one line of JSON: JSON.stringify escapes every line break but
 * U+0085, U+2028 and U+2029, which some line splitters (Python's
 * str.splitlines) also break on; they are escaped here too. */
export function jsonLine(value) {
  return `${JSON.stringify(value).replace(/[\u0085\u2028\u2029]/g, c => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`)}\n`;
}

function describeError(error) {
  if (error instanceof Error) {
    return error.name && error.name !== 'Error' ? `${error.name}: ${error.message}` : error.message;
  }
  return String(error);
}
