#!/usr/bin/env node
// A steered answer, seen by the real ai@7 chat (AbstractChat, over
// DefaultChatTransport or WebSocketChatTransport), against live uistream
// servers; and the same steering done by ai@7's own streamText, for where
// the SDK puts the steering-message part.
//
//   node steer_client.mjs '<json>'
//
// <json>: {"scenario": "chat" | "oracle", ...}
//
// - chat {transport: "http"|"ws", base, steerBase, cookie, csrf, chatId,
//   text, after, steer: {kind: "steer"|"queue", id, text, over: "http"|"ws"}}:
//   the chat sends `text` to `base`; once the answer holds `after` words, the
//   steering message goes to `steerBase` (another server process, maybe):
//   POST <steerBase>/api/chat/<chatId>/<kind>, or a `steer` frame on a
//   socket of its own. → {outcome, status, error, messages}
// - oracle {steps: [[text, toolCalled?], ...], steerAfterStep, steerText}:
//   streamText with ai@7's MockLanguageModelV4 answering `steps`, a tool
//   `pause`, and experimental_steering: the steer is sent while step
//   `steerAfterStep`'s tool runs. → {outcome, parts: the UI message's part
//   types, as readUIMessageStream builds it, steering: the steering part}
//
// Messages are normalised with JSON.parse(JSON.stringify(...)) as stored.
// Exit status: 0 when the scenario ran, 1 when it failed.

import { DefaultChatTransport, experimental_createSteering, readUIMessageStream, streamText, tool } from 'ai7';
import { MockLanguageModelV4, convertArrayToReadableStream } from 'ai7/test';
import WebSocket from 'ws';
import { z } from 'zod';
import { Chat, openChat, plain, textOf, waitFor } from './lib/ws_chat.mjs';

const words = chat => textOf(chat.messages.findLast(m => m.role === 'assistant')).split(/\s+/).filter(Boolean).length;

function httpChat({ base, cookie, csrf, chatId }) {
  const headers = { 'x-csrftoken': csrf, cookie };
  const transport = new DefaultChatTransport({ api: `${base}/api/chat`, headers });
  const chat = new Chat({ id: chatId, transport });
  return { chat, close: () => {} };
}

function wsChat({ base, cookie, chatId }) {
  const { chat, transport } = openChat({ url: `${base.replace('http://', 'ws://')}/ws/chat/`, origin: base, cookie, chatId });
  return { chat, close: () => transport.close() };
}

async function steerOverHttp({ steerBase, cookie, csrf, chatId }, { kind, id, text }) {
  const response = await fetch(`${steerBase}/api/chat/${chatId}/${kind}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-csrftoken': csrf, cookie },
    body: JSON.stringify({ id, message: { id: `m-${id}`, role: 'user', parts: [{ type: 'text', text }] } }),
  });
  return { status: response.status, body: await response.json() };
}

function steerOverSocket({ steerBase, cookie, chatId }, { kind, id, text }) {
  return new Promise((resolve, reject) => {
    const socket = new WebSocket(`${steerBase.replace('http://', 'ws://')}/ws/chat/`, { headers: { Cookie: cookie }, origin: steerBase });
    socket.on('open', () =>
      socket.send(
        JSON.stringify({
          type: kind,
          requestId: 'steer-1',
          id: chatId,
          steeringId: id,
          message: { id: `m-${id}`, role: 'user', parts: [{ type: 'text', text }] },
        }),
      ),
    );
    socket.on('message', data => {
      const frame = JSON.parse(String(data));
      socket.close();
      resolve(frame.type === 'steering-outcome' ? { status: 200, body: frame.outcome } : { status: null, body: frame });
    });
    socket.on('error', reject);
  });
}

async function chatScenario(args) {
  const { chat, close } = args.transport === 'ws' ? wsChat(args) : httpChat(args);
  const sending = chat.sendMessage({ text: args.text });
  await waitFor(() => words(chat) >= args.after, `${args.after} words`);
  const outcome = await (args.steer.over === 'ws' ? steerOverSocket : steerOverHttp)(args, args.steer);
  await sending;
  const result = { outcome, status: chat.status, error: chat.error?.message ?? null, messages: plain(chat.messages) };
  close();
  return result;
}

function modelStep([text, callsPause]) {
  const chunks = [
    { type: 'stream-start', warnings: [] },
    { type: 'text-start', id: 't' },
    { type: 'text-delta', id: 't', delta: text },
    { type: 'text-end', id: 't' },
  ];
  if (callsPause) chunks.push({ type: 'tool-call', toolCallId: `call-${text.length}`, toolName: 'pause', input: '{}' });
  chunks.push({
    type: 'finish',
    finishReason: { unified: callsPause ? 'tool-calls' : 'stop', raw: undefined },
    usage: { inputTokens: { total: 1 }, outputTokens: { total: 1 } },
  });
  return { stream: convertArrayToReadableStream(chunks) };
}

async function oracle({ steps, steerAfterStep, steerText }) {
  const steering = experimental_createSteering();
  let step = 0;
  let outcome;
  const model = new MockLanguageModelV4({ doStream: async () => modelStep(steps[step++]) });
  const result = streamText({
    model,
    prompt: 'count',
    stopWhen: () => false,
    experimental_steering: steering,
    tools: {
      pause: tool({
        inputSchema: z.object({}),
        execute: async () => {
          if (step - 1 === steerAfterStep) outcome = steering.steer(steerText, { id: 's1' });
          return { paused: true };
        },
      }),
    },
  });
  let message;
  for await (const built of readUIMessageStream({ stream: result.toUIMessageStream() })) message = built;
  const parts = plain(message.parts);
  return {
    outcome: await outcome,
    parts: parts.map(p => p.type),
    steering: parts.find(p => p.type === 'steering-message') ?? null,
  };
}

const args = JSON.parse(process.argv[2]);
try {
  const out = args.scenario === 'oracle' ? await oracle(args) : await chatScenario(args);
  process.stdout.write(`${JSON.stringify(out)}\n`);
  process.exit(0);
} catch (error) {
  process.stderr.write(`${error.stack ?? error}\n`);
  process.exit(1);
}
