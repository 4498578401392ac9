#!/usr/bin/env node
// The real ai@7 WebSocketChatTransport against a uistream server: the
// scenarios tests/test_consumer.py runs and checks against the database.
//
//   node ws_client.mjs '<json>'
//
// The argument is one JSON object: {scenario, url, cookie, origin, chatId,
// text, after, ...}; the result is one JSON line on stdout. `url` is the
// ws://…/ws/chat/ endpoint; `cookie` the page's Cookie header; `origin` the
// page's Origin. Messages are normalised (JSON round trip) as they would be
// stored. Scenarios:
//
// - send {text}: send one message, wait for the answer.
//   → {status, error, messages, finishes}
// - abort {text, after}: send; once the answer holds `after` words, the
//   page's stop(). → {status, messages, finishes}
// - drop-resume {text, after}: send; once the answer holds `after` words,
//   the socket is cut (no close frame: a network loss); then resumeStream()
//   on a new socket. → {statusAfterDrop, status, messages, finishes,
//   sockets}
// - tabs {text, after, url2, origin2}: tab A sends; once its answer holds
//   `after` words, tab B (same chat, same cookie, `url2`: another server
//   process, whose page is from `origin2`) opens and resumes. → {a: {status, messages}, b: {status, messages}}
// - no-active: resumeStream() on a chat with nothing running. → {status,
//   messages, sockets}
// - approval {text, approved}: send; answer the approval request the answer
//   ends with; the chat sends the answer by itself (sendAutomaticallyWhen)
//   and the same message goes on. → {status, error, messages, finishes}
// - raw {frames: [string | {binary: string}]}: one socket per frame, the
//   frame sent as is. → {closes: [{code, reason}]}
// - handshake: only open a socket. → {opened, status} (status: the HTTP
//   status of a refused handshake)
//
// Exit status: 0 when the scenario ran (whatever it found), 1 when it
// failed, 2 for a bad argument.

import { lastAssistantMessageIsCompleteWithApprovalResponses } from 'ai7';
import WebSocket from 'ws';
import { openChat, plain, textOf, waitFor } from './lib/ws_chat.mjs';

const words = message => textOf(message).split(/\s+/).filter(Boolean).length;
const lastAssistant = chat => chat.messages.findLast(m => m.role === 'assistant');

function snapshot(chat) {
  return { status: chat.status, error: chat.error?.message ?? null, messages: plain(chat.messages) };
}

async function send(args) {
  const { chat, finishes } = openChat(args);
  await chat.sendMessage({ text: args.text });
  return { ...snapshot(chat), finishes };
}

async function abort(args) {
  const { chat, finishes, transport } = openChat(args);
  const sending = chat.sendMessage({ text: args.text });
  await waitFor(() => words(lastAssistant(chat)) >= args.after, `${args.after} words`);
  await chat.stop();
  await sending;
  const result = { ...snapshot(chat), finishes };
  transport.close();
  return result;
}

async function dropResume(args) {
  const { chat, finishes, sockets, transport } = openChat(args);
  const sending = chat.sendMessage({ text: args.text });
  await waitFor(() => words(lastAssistant(chat)) >= args.after, `${args.after} words`);
  const wordsAtDrop = words(lastAssistant(chat));
  sockets[0].terminate();
  await sending;
  const statusAfterDrop = chat.status;
  await chat.resumeStream();
  const result = { ...snapshot(chat), statusAfterDrop, wordsAtDrop, finishes, sockets: sockets.length };
  transport.close();
  return result;
}

async function tabs(args) {
  const a = openChat(args);
  const sending = a.chat.sendMessage({ text: args.text });
  await waitFor(() => words(lastAssistant(a.chat)) >= args.after, `${args.after} words`);
  // Tab B loads the page: the stored user message, then resume.
  const userMessage = plain(a.chat.messages.find(m => m.role === 'user'));
  const b = openChat({ ...args, url: args.url2 ?? args.url, origin: args.origin2 ?? args.origin, messages: [userMessage] });
  const resuming = b.chat.resumeStream();
  await Promise.all([sending, resuming]);
  const result = { a: snapshot(a.chat), b: snapshot(b.chat), wordsWhenBJoined: null };
  a.transport.close();
  b.transport.close();
  return result;
}

async function approval(args) {
  const { chat, finishes, transport } = openChat({
    ...args,
    sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithApprovalResponses,
  });
  await chat.sendMessage({ text: args.text });
  const part = chat.lastMessage?.parts.find(p => p.state === 'approval-requested');
  if (part == null) throw new Error(`no approval request: ${JSON.stringify(chat.lastMessage)}`);
  await chat.addToolApprovalResponse({ id: part.approval.id, approved: args.approved });
  await waitFor(() => finishes.length === 2 && chat.status !== 'streaming', 'the continued answer');
  const result = { ...snapshot(chat), finishes };
  transport.close();
  return result;
}

async function noActive(args) {
  const { chat, sockets, transport } = openChat(args);
  await chat.resumeStream();
  const result = { ...snapshot(chat), sockets: sockets.length };
  transport.close();
  return result;
}

function openRaw({ url, cookie, origin }) {
  const headers = cookie ? { Cookie: cookie } : {};
  return new WebSocket(url, { headers, origin });
}

async function raw(args) {
  const closes = [];
  for (const frame of args.frames) {
    const socket = openRaw(args);
    const closed = new Promise((resolve, reject) => {
      socket.on('close', (code, reason) => resolve({ code, reason: reason.toString() }));
      socket.on('error', reject);
    });
    await new Promise((resolve, reject) => {
      socket.on('open', resolve);
      socket.on('error', reject);
    });
    if (typeof frame === 'string') socket.send(frame);
    else socket.send(Buffer.from(frame.binary), { binary: true });
    closes.push(await closed);
  }
  return { closes };
}

async function handshake(args) {
  const socket = openRaw(args);
  return new Promise(resolve => {
    socket.on('open', () => {
      socket.close(1000);
      resolve({ opened: true, status: 101 });
    });
    socket.on('unexpected-response', (_request, response) => {
      resolve({ opened: false, status: response.statusCode });
      socket.terminate();
    });
    socket.on('error', () => resolve({ opened: false, status: null }));
  });
}

const SCENARIOS = {
  send,
  abort,
  'drop-resume': dropResume,
  tabs,
  'no-active': noActive,
  approval,
  raw,
  handshake,
};

async function main(argv) {
  let args;
  try {
    args = JSON.parse(argv[0] ?? '');
  } catch {
    args = null;
  }
  const run = SCENARIOS[args?.scenario];
  if (run == null) {
    process.stderr.write(`usage: node ws_client.mjs '{"scenario": "${Object.keys(SCENARIOS).join('|')}", ...}'\n`);
    return 2;
  }
  const result = await run(args);
  process.stdout.write(`${JSON.stringify(result)}\n`);
  return 0;
}

main(process.argv.slice(2)).then(
  code => process.exit(code),
  error => {
    process.stderr.write(`${error?.stack ?? error}\n`);
    process.exit(1);
  },
);
