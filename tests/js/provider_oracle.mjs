#!/usr/bin/env node
// What the real AI SDK provider package and ai@7 make of one provider
// response body: the oracle for provider streams the recorded corpus lacks.
//
//   node provider_oracle.mjs PROVIDER FILE.sse [TOOL ...]
//
// PROVIDER is `anthropic` (@ai-sdk/anthropic, Messages API) or
// `openai-responses` (@ai-sdk/openai's Responses model). FILE.sse is served,
// as it is, as the provider's streaming answer (through the package's
// `fetch` option, no network); TOOL names the client tools the body calls,
// declared without `execute`, so none runs. ai@7's streamText reads the
// provider's stream and toUIMessageStream({ sendSources: true }) →
// readUIMessageStream builds the message, as the peer corpus's answers were
// made.
//
// Output (stdout), one JSON object on one line:
//
//   {"message": {...},          // the final UIMessage (null if none)
//    "text": "...",             // streamText's text
//    "finishReason": "length",  // streamText's finish reason (null if it threw)
//    "rawFinishReason": "...",  // the provider's own reason
//    "usage": {...},            // streamText's usage
//    "errors": ["..."]}         // errors streamText reported
//
// Exit status: 0 when the script ran (a provider error is reported in
// `errors`), 2 for a usage error.
//
//   node provider_oracle.mjs request PROVIDER MESSAGES.json
//
// The other direction: what the provider package sends. MESSAGES.json is a
// list of UIMessages (user messages with text and file parts, files as
// `data:` URLs, as useChat sends them); ai@7's convertToModelMessages and
// streamText hand them to the provider, whose request body (the first
// `fetch`, answered with an error so nothing streams) is written as
// {"body": {...}, "errors": [...]}; a file the provider refuses leaves
// "body": null and its error. PROVIDER may also be `openai-chat`
// (@ai-sdk/openai's chat-completions model). MESSAGES.json may hold
// assistant messages too (as useChat keeps them: tool parts, provider
// metadata); an optional third argument is streamText's providerOptions as
// JSON (e.g. '{"openai": {"store": false}}').

import { readFileSync } from 'node:fs';
import { createAnthropic } from '@ai-sdk/anthropic';
import { createOpenAI } from '@ai-sdk/openai';
import { convertToModelMessages, jsonSchema, readUIMessageStream, streamText, tool } from 'ai7';
import { jsonLine } from './lib/sdk.mjs';

// The package's compatibility notices (an unknown model id) are not results.
globalThis.AI_SDK_LOG_WARNINGS = false;

const USAGE = 'usage: node provider_oracle.mjs anthropic|openai-responses FILE.sse [TOOL ...]';
const BASE_URL = 'http://oracle.invalid/v1';

function modelFor(provider, fetch) {
  if (provider === 'anthropic') {
    return createAnthropic({ apiKey: 'oracle', baseURL: BASE_URL, fetch })('peer-model');
  }
  if (provider === 'openai-responses') {
    return createOpenAI({ apiKey: 'oracle', baseURL: BASE_URL, fetch }).responses('peer-model');
  }
  if (provider === 'openai-chat') {
    return createOpenAI({ apiKey: 'oracle', baseURL: BASE_URL, fetch }).chat('peer-model');
  }
  return null;
}

async function request(provider, file, providerOptions) {
  let body = null;
  const fetch = async (url, init) => {
    body ??= JSON.parse(init.body);
    return new Response('{"error": {"message": "oracle"}}', {
      status: 400,
      headers: { 'content-type': 'application/json' },
    });
  };
  const model = file && modelFor(provider, fetch);
  if (!model) {
    process.stderr.write(`${USAGE}\n`);
    return 2;
  }
  const errors = [];
  const result = streamText({
    model,
    messages: await convertToModelMessages(JSON.parse(readFileSync(file, 'utf8'))),
    ...(providerOptions ? { providerOptions: JSON.parse(providerOptions) } : {}),
    maxRetries: 0,
    onError: ({ error }) => errors.push(String(error?.message ?? error)),
  });
  await settled(result.consumeStream());
  await settled(result.text);
  process.stdout.write(jsonLine({ body, errors }));
  return 0;
}

async function settled(promise) {
  try {
    return await promise;
  } catch {
    return null;
  }
}

async function main(argv) {
  if (argv[0] === 'request') return request(argv[1], argv[2], argv[3]);
  const [provider, file, ...toolNames] = argv;
  const bytes = file ? readFileSync(file) : null;
  const fetch = async () =>
    new Response(bytes, { status: 200, headers: { 'content-type': 'text/event-stream' } });
  const model = bytes && modelFor(provider, fetch);
  if (!model) {
    process.stderr.write(`${USAGE}\n`);
    return 2;
  }
  const tools = Object.fromEntries(
    toolNames.map(name => [name, tool({ inputSchema: jsonSchema({ type: 'object' }) })]),
  );
  const errors = [];
  const result = streamText({
    model,
    prompt: 'hi',
    tools,
    maxRetries: 0,
    onError: ({ error }) => errors.push(String(error?.message ?? error)),
  });
  let message = null;
  const stream = result.toUIMessageStream({ sendSources: true, onError: error => String(error?.message ?? error) });
  for await (const snapshot of readUIMessageStream({ stream })) {
    message = snapshot;
  }
  process.stdout.write(
    jsonLine({
      message: message && JSON.parse(JSON.stringify(message)),
      text: await settled(result.text),
      finishReason: await settled(result.finishReason),
      rawFinishReason: await settled(result.rawFinishReason),
      usage: await settled(result.usage),
      errors,
    }),
  );
  return 0;
}

process.exitCode = await main(process.argv.slice(2));
