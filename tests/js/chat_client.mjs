#!/usr/bin/env node
// The useChat core of a real `ai` client (AbstractChat + DefaultChatTransport,
// what @ai-sdk/react's useChat wraps) driven against a live uistream server.
//
//   node chat_client.mjs '<json>'
//
// <json>: {"base": "http://127.0.0.1:PORT", "api": "/api/chat", "chatId": "...",
//          "version": 5|6|7, "cookie": "sessionid=...; csrftoken=...", "csrf": "...",
//          "steps": [{"send": "text", "files"?: [{"path", "mediaType", "filename"?}]}
//                    | {"regenerate": true} | {"resume": true}
//                    | {"approve": true|false, "reason"?: "...", "edit"?: {...}}],
//          "clientTools": {"NAME": <output>}}
// "approve" answers the pending approval request of the last message the way
// a person's click does (addToolApprovalResponse; the chat sends it by itself,
// sendAutomaticallyWhen = lastAssistantMessageIsCompleteWithApprovalResponses).
// "edit" first replaces the call's input in the chat's state (a person who
// edits the arguments before approving: the message the chat sends back
// carries them).
// "files" attaches files to the message as ai@7 file parts (the bytes read
// from "path", sent as a data: URL, as useChat does with a FileList).
// "clientTools" makes the browser run those tools (onToolCall + addToolOutput,
// sent by itself when every call has its output); {"waitFinished": n} waits
// until n answers have finished.
// The version is sent as the x-uistream-sdk-version header, the way a project
// serving old clients would configure its transport.
// Prints one JSON line: {"messages": [...], "status", "error", "finished": n,
// "progress": {toolCallId: [outputs]}} where messages are the chat's state
// after the last step, normalised with JSON.parse(JSON.stringify(...)) as
// they would be stored, and progress lists, per tool call, every distinct
// preliminary output the chat's state showed while it streamed.

import { readFileSync } from 'node:fs';
import { SDKS } from './lib/sdk.mjs';

function fileParts(files) {
  return files.map(({ path, mediaType, filename }) => ({
    type: 'file',
    mediaType,
    ...(filename !== undefined && { filename }),
    url: `data:${mediaType};base64,${readFileSync(path).toString('base64')}`,
  }));
}

const progress = {};

function noteProgress(message) {
  for (const part of message.parts ?? []) {
    if (part.preliminary !== true || part.toolCallId === undefined) continue;
    const seen = (progress[part.toolCallId] ??= []);
    const output = JSON.stringify(part.output);
    if (seen[seen.length - 1] !== output) seen.push(output);
  }
}

class State {
  constructor() {
    this.status = 'ready';
    this.error = undefined;
    this.messages = [];
  }
  pushMessage(message) {
    this.messages = this.messages.concat(message);
  }
  popMessage() {
    this.messages = this.messages.slice(0, -1);
  }
  replaceMessage(index, message) {
    noteProgress(message);
    this.messages = [...this.messages.slice(0, index), this.snapshot(message), ...this.messages.slice(index + 1)];
  }
  snapshot(thing) {
    return structuredClone(thing);
  }
}

async function main() {
  const options = JSON.parse(process.argv[2]);
  const sdk = SDKS[options.version ?? 7];
  const headers = { 'x-uistream-sdk-version': String(options.version ?? 7) };
  if (options.csrf) headers['x-csrftoken'] = options.csrf;
  // A browser's cookie jar, as far as this test needs one: the server may
  // start the visitor's session on the first answer.
  const jar = new Map(
    (options.cookie ?? '')
      .split('; ')
      .filter(Boolean)
      .map(pair => pair.split('=')),
  );
  const fetchWithCookies = async (input, init = {}) => {
    const request = new Headers(init.headers);
    request.set('cookie', [...jar].map(([k, v]) => `${k}=${v}`).join('; '));
    const response = await fetch(input, { ...init, headers: request });
    for (const line of response.headers.getSetCookie()) {
      const [pair] = line.split(';');
      const at = pair.indexOf('=');
      jar.set(pair.slice(0, at).trim(), pair.slice(at + 1));
    }
    return response;
  };
  const transport = new sdk.DefaultChatTransport({
    api: options.base + (options.api ?? '/api/chat'),
    headers,
    fetch: fetchWithCookies,
  });
  let finished = 0;
  let lastError = null;
  let settled = () => {};
  const clientTools = options.clientTools ?? {};
  const whenDone = () => new Promise(resolve => (settled = resolve));
  let chat;
  class NodeChat extends sdk.AbstractChat {
    constructor() {
      super({
        id: options.chatId,
        transport,
        state: new State(),
        onFinish: () => {
          finished += 1;
          settled();
        },
        onError: error => {
          lastError = error.message;
          settled();
        },
        onToolCall: ({ toolCall }) => {
          if (toolCall.toolName in clientTools) {
            // Not awaited: the SDK's own advice inside onToolCall.
            void chat.addToolOutput({
              tool: toolCall.toolName,
              toolCallId: toolCall.toolCallId,
              output: clientTools[toolCall.toolName],
            });
          }
        },
        sendAutomaticallyWhen: ({ messages }) =>
          (sdk.lastAssistantMessageIsCompleteWithApprovalResponses?.({ messages }) ?? false) ||
          sdk.lastAssistantMessageIsCompleteWithToolCalls({ messages }),
      });
    }
  }
  chat = new NodeChat();
  for (const step of options.steps) {
    if (step.send !== undefined) {
      const done = whenDone();
      await chat.sendMessage(
        step.files ? { text: step.send, files: fileParts(step.files) } : { text: step.send },
      );
      await done;
    } else if (step.waitFinished !== undefined) {
      // An answer the chat requests by itself (after a client tool's output).
      while (finished < step.waitFinished && lastError === null) await whenDone();
    } else if (step.regenerate) await chat.regenerate();
    else if (step.resume) await chat.resumeStream();
    else if (step.approve !== undefined) {
      const last = chat.messages[chat.messages.length - 1];
      const part = last.parts.find(p => p.state === 'approval-requested');
      if (!part) throw new Error('no approval request to answer');
      if (step.edit !== undefined) {
        const edited = { ...last, parts: last.parts.map(p => (p === part ? { ...p, input: step.edit } : p)) };
        chat.messages = [...chat.messages.slice(0, -1), edited];
      }
      const done = whenDone();
      await chat.addToolApprovalResponse({ id: part.approval.id, approved: step.approve, reason: step.reason });
      await done;
    }
  }
  const state = chat.state ?? chat['~state'] ?? {};
  const messages = chat.messages ?? state.messages;
  process.stdout.write(
    JSON.stringify({
      messages: JSON.parse(JSON.stringify(messages)),
      status: chat.status,
      error: lastError,
      finished,
      progress: Object.fromEntries(Object.entries(progress).map(([id, seen]) => [id, seen.map(JSON.parse)])),
    }) + '\n',
  );
}

main().catch(error => {
  process.stderr.write(`${error.stack ?? error}\n`);
  process.exit(1);
});
