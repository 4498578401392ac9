// A chat as a page holds it, over ai@7's WebSocketChatTransport, in Node.
//
// `Chat` is the SDK's own AbstractChat with the state class the React
// binding uses (@ai-sdk/react's ReactChatState: arrays replaced, never
// mutated; messages snapshotted with structuredClone), so sendMessage,
// stop and resumeStream run the SDK's request pipeline unchanged.
//
// Node 20 has no global WebSocket, and a browser sends the page's cookie
// and Origin with the handshake by itself: `socketClass` returns the `ws`
// package's WebSocket (what the transport's `webSocket` option is for) with
// those two headers set, and keeps every socket it opened, so a test can
// cut one the way a network does (`terminate()`: no close frame).

import { AbstractChat, WebSocketChatTransport } from 'ai7';
import WebSocket from 'ws';

class ChatState {
  constructor(messages = []) {
    this.messages = messages;
    this.status = 'ready';
    this.error = undefined;
  }

  pushMessage = message => {
    this.messages = this.messages.concat(message);
  };

  popMessage = () => {
    this.messages = this.messages.slice(0, -1);
  };

  replaceMessage = (index, message) => {
    this.messages = [...this.messages.slice(0, index), this.snapshot(message), ...this.messages.slice(index + 1)];
  };

  snapshot = value => structuredClone(value);
}

export class Chat extends AbstractChat {
  constructor({ messages, ...init }) {
    super({ ...init, state: new ChatState(messages) });
  }
}

/** A WebSocket class that sends `cookie` and `origin` with its handshake and
 * records its sockets in `.sockets`. */
export function socketClass({ cookie, origin }) {
  const sockets = [];
  class PageWebSocket extends WebSocket {
    constructor(url, protocols) {
      const headers = cookie ? { Cookie: cookie } : {};
      super(url, protocols, { headers, origin });
      sockets.push(this);
    }
  }
  PageWebSocket.sockets = sockets;
  return PageWebSocket;
}

/** A page's chat `chatId` talking to `url` (ws://…/ws/chat/). */
export function openChat({ url, chatId, cookie, origin, messages = [], onFinish, sendAutomaticallyWhen }) {
  const webSocket = socketClass({ cookie, origin });
  const transport = new WebSocketChatTransport({ url, webSocket });
  const finishes = [];
  const chat = new Chat({
    id: chatId,
    messages,
    transport,
    sendAutomaticallyWhen,
    onFinish: event => {
      finishes.push({
        isAbort: event.isAbort,
        isDisconnect: event.isDisconnect,
        isError: event.isError,
        finishReason: event.finishReason ?? null,
      });
      onFinish?.(event);
    },
  });
  return { chat, transport, sockets: webSocket.sockets, finishes };
}

/** The text of a message's text parts. */
export function textOf(message) {
  return (message?.parts ?? [])
    .filter(part => part.type === 'text')
    .map(part => part.text)
    .join('');
}

/** Resolve once `predicate()` holds (checked every few ms), or reject. */
export function waitFor(predicate, what, timeoutMs = 20_000) {
  const deadline = Date.now() + timeoutMs;
  return new Promise((resolve, reject) => {
    const check = () => {
      if (predicate()) return resolve();
      if (Date.now() > deadline) return reject(new Error(`timed out waiting for ${what}`));
      setTimeout(check, 5);
    };
    check();
  });
}

/** A message as it would be stored or sent back: `undefined` fields gone. */
export const plain = value => JSON.parse(JSON.stringify(value ?? null));
