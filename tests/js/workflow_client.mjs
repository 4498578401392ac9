#!/usr/bin/env node
// Vercel's WorkflowChatTransport (@workflow/ai, pinned) under the useChat core
// of the real `ai` client (ai@7's AbstractChat, what @ai-sdk/react wraps),
// against a live uistream server, unchanged: its own request body (no id,
// sent as text/plain), its own reconnect URL and startIndex arithmetic.
// Only the page's part is ours: the session cookie and the CSRF header go
// through the transport's `fetch` option, as a page's would.
//
//   node workflow_client.mjs '<json>'
//
// <json>: {"base": "http://127.0.0.1:PORT", "api": "/api/chat", "chatId": "...",
//          "cookie": "sessionid=...; csrftoken=...", "csrf": "...",
//          "steps": [{"send": "text"} | {"approve": true|false}
//                    | {"tail": {"startIndex": -5, "runId"?: "..."}}]}
// "send" sends a message and waits until the chat settles (finished or failed).
// "approve" answers the last message's pending approval as a person's click
// does; the chat sends the continuation by itself (still without a chat id).
// "tail" reads a stream through the transport's own reconnectToStream, from
// startIndex (negative: from the end), by run id when given (else by the
// chat id of the last answer's response), and records the chunks it yields.
// Prints one JSON line: {"messages", "status", "error", "finished", "runIds",
// "chatIds", "tails": [[chunk, ...], ...]}.

import { AbstractChat, lastAssistantMessageIsCompleteWithApprovalResponses } from 'ai';
import { WorkflowChatTransport } from '@workflow/ai';

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
    this.messages = [...this.messages.slice(0, index), this.snapshot(message), ...this.messages.slice(index + 1)];
  }
  snapshot(thing) {
    return structuredClone(thing);
  }
}

async function main() {
  const options = JSON.parse(process.argv[2]);
  const api = options.base + (options.api ?? '/api/chat');
  const jar = new Map(
    (options.cookie ?? '')
      .split('; ')
      .filter(Boolean)
      .map(pair => pair.split('=')),
  );
  // The page's fetch: its cookies and Django's CSRF header on every request.
  const pageFetch = async (input, init = {}) => {
    const headers = new Headers(init.headers);
    headers.set('cookie', [...jar].map(([k, v]) => `${k}=${v}`).join('; '));
    if (options.csrf) headers.set('x-csrftoken', options.csrf);
    const response = await fetch(input, { ...init, headers });
    for (const line of response.headers.getSetCookie()) {
      const [pair] = line.split(';');
      const at = pair.indexOf('=');
      jar.set(pair.slice(0, at).trim(), pair.slice(at + 1));
    }
    return response;
  };
  const runIds = [];
  const chatIds = [];
  const transport = new WorkflowChatTransport({
    api,
    fetch: pageFetch,
    onChatSendMessage: response => {
      runIds.push(response.headers.get('x-workflow-run-id'));
      chatIds.push(response.headers.get('x-uistream-chat-id'));
    },
  });
  let finished = 0;
  let lastError = null;
  let settled = () => {};
  const whenDone = () => new Promise(resolve => (settled = resolve));
  const chat = new (class extends AbstractChat {})({
    id: options.chatId ?? 'client-side-id',
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
    sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithApprovalResponses,
  });
  const tails = [];
  for (const step of options.steps) {
    if (step.send !== undefined) {
      const done = whenDone();
      await chat.sendMessage({ text: step.send });
      await done;
    } else if (step.approve !== undefined) {
      const last = chat.messages[chat.messages.length - 1];
      const part = last.parts.find(p => p.state === 'approval-requested');
      if (!part) throw new Error('no approval request to answer');
      const done = whenDone();
      await chat.addToolApprovalResponse({ id: part.approval.id, approved: step.approve });
      await done;
    } else if (step.tail !== undefined) {
      const { startIndex, runId } = step.tail;
      const reader = new WorkflowChatTransport({
        api,
        fetch: pageFetch,
        prepareReconnectToStreamRequest: ({ api: url }) => ({
          api: runId ? `${api}/${encodeURIComponent(runId)}/stream` : url,
        }),
      });
      const chatId = chatIds[chatIds.length - 1];
      const stream = await reader.reconnectToStream({ chatId, startIndex });
      const chunks = [];
      for await (const chunk of stream) chunks.push(chunk);
      tails.push(chunks);
    }
  }
  process.stdout.write(
    JSON.stringify({
      messages: JSON.parse(JSON.stringify(chat.messages)),
      status: chat.status,
      error: lastError,
      finished,
      runIds,
      chatIds,
      tails,
    }) + '\n',
  );
}

main().catch(error => {
  process.stderr.write(`${error.stack ?? error}\n`);
  process.exit(1);
});
