// One conversation on useChat: the stored messages come in as `messages`,
// `resume: true` picks up an answer that is still streaming (after a
// reload, say), stop goes through the server's stop endpoint, and approvals
// are sent by the chat itself once every pending call is answered.

import { useChat } from '@ai-sdk/react';
import { DefaultChatTransport, lastAssistantMessageIsCompleteWithApprovalResponses } from 'ai';
import { WorkflowChatTransport } from '@workflow/ai';
import { useCallback, useEffect, useMemo, useRef, useState } from 'react';
import { api, csrfHeaders, errorText, urls } from './api.js';
import { MessageParts } from './parts.jsx';

const EXAMPLES = [
  "What's the weather in Paris and Rome?",
  'compute 12 * (3 + 4)',
  'count to 50',
  'email ada@example.com saying hello',
  'email ada@trusted.test saying hello',
  'research tides',
];

const RUN_BADGES = { stopped: 'Stopped', cancelled: 'Connection lost', failed: 'Failed' };

// `/?transport=workflow`: Vercel's WorkflowChatTransport instead of the
// default one. It reconnects by itself when a stream ends without `finish`
// (GET chat/<run id>/stream?startIndex=N), and after a reload by the run id
// this tab remembers from the POST's x-workflow-run-id header.
const WORKFLOW = new URLSearchParams(window.location.search).get('transport') === 'workflow';
const runKey = chatId => `uistream-run:${chatId}`;

function workflowTransport(chatId) {
  return new WorkflowChatTransport({
    api: urls.chat,
    // The page's part: its cookies and the CSRF header, read at each request.
    fetch: (input, init = {}) =>
      fetch(input, {
        ...init,
        headers: { ...Object.fromEntries(new Headers(init.headers)), ...csrfHeaders() },
        credentials: 'same-origin',
      }),
    // The transport sends only `messages` (the server accepts that, and
    // picks the chat); the page adds what Edit and Regenerate need.
    prepareSendMessagesRequest: ({ id, messages, trigger, messageId, body }) => ({
      body: { ...body, id, messages, trigger, messageId },
    }),
    onChatSendMessage: response => {
      const runId = response.headers.get('x-workflow-run-id');
      if (runId) sessionStorage.setItem(runKey(chatId), runId);
    },
    prepareReconnectToStreamRequest: ({ api }) => {
      const runId = sessionStorage.getItem(runKey(chatId));
      return { api: runId ? `${urls.chat}/${encodeURIComponent(runId)}/stream` : api };
    },
  });
}

const sleep = ms => new Promise(resolve => setTimeout(resolve, ms));

function textOf(message) {
  return message.parts
    .filter(p => p.type === 'text')
    .map(p => p.text)
    .join('');
}

function Composer({ busy, stopping, onSend, onStop }) {
  const [input, setInput] = useState('');
  const submit = event => {
    event.preventDefault();
    const text = input.trim();
    if (!text || busy) return;
    setInput('');
    onSend(text);
  };
  return (
    <form className="composer" onSubmit={submit}>
      <textarea
        aria-label="Message"
        placeholder="Ask the demo model something…"
        rows={1}
        value={input}
        onChange={event => setInput(event.target.value)}
        onKeyDown={event => {
          if (event.key === 'Enter' && !event.shiftKey && !event.nativeEvent.isComposing) submit(event);
        }}
      />
      {busy ? (
        <button type="button" className="stop" onClick={onStop} disabled={stopping}>
          {stopping ? 'Stopping…' : 'Stop'}
        </button>
      ) : (
        <button type="submit" className="send" disabled={!input.trim()}>
          Send
        </button>
      )}
    </form>
  );
}

function UserMessage({ message, editable, onEdit }) {
  const [draft, setDraft] = useState(null);
  if (draft !== null) {
    return (
      <form
        className="message user editing"
        onSubmit={event => {
          event.preventDefault();
          if (!draft.trim()) return;
          setDraft(null);
          onEdit(message.id, draft.trim());
        }}
      >
        <textarea aria-label="Edit message" value={draft} onChange={event => setDraft(event.target.value)} autoFocus />
        <div className="message-actions">
          <button type="submit">Save &amp; resend</button>
          <button type="button" onClick={() => setDraft(null)}>
            Cancel
          </button>
        </div>
      </form>
    );
  }
  return (
    <div className="message user" data-message-id={message.id}>
      <div className="bubble">
        <MessageParts message={message} />
      </div>
      {editable && (
        <div className="message-actions">
          <button type="button" className="edit" onClick={() => setDraft(textOf(message))}>
            Edit
          </button>
        </div>
      )}
    </div>
  );
}

function AssistantMessage({ message, runStatus, busy, isLast, onApproval, onRegenerate }) {
  const badge = RUN_BADGES[runStatus];
  return (
    <div className="message assistant" data-message-id={message.id} data-run-status={runStatus ?? ''}>
      <MessageParts message={message} onApproval={onApproval} busy={busy} />
      {(badge || (isLast && !busy)) && (
        <div className="message-actions">
          {badge && <span className={`badge badge-run-${runStatus}`}>{badge}</span>}
          {isLast && !busy && (
            <button type="button" className="regenerate" onClick={onRegenerate}>
              Regenerate
            </button>
          )}
        </div>
      )}
    </div>
  );
}

export function ChatPane({ chatId, initialMessages, initialStatuses, onActivity }) {
  const transport = useMemo(
    () =>
      WORKFLOW
        ? workflowTransport(chatId)
        : new DefaultChatTransport({
            api: urls.chat,
            // Read at each request: the CSRF cookie can change (a login).
            headers: () => csrfHeaders(),
            credentials: 'same-origin',
          }),
    [chatId],
  );
  const [runStatuses, setRunStatuses] = useState(initialStatuses);
  const [stopping, setStopping] = useState(false);

  const refreshStatuses = useCallback(() => {
    api.runStatuses(chatId).then(setRunStatuses, () => {});
  }, [chatId]);

  const { messages, sendMessage, status, error, stop, regenerate, addToolApprovalResponse, clearError } = useChat({
    id: chatId,
    messages: initialMessages,
    transport,
    // A chat with no stored messages has nothing to resume (and the server
    // does not know it yet: its resume would be a 404). WorkflowChatTransport
    // reads a run that ended too (and, stopped, fails): only a running one.
    resume: WORKFLOW
      ? Object.values(initialStatuses).includes('running')
      : initialMessages.length > 0,
    sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithApprovalResponses,
    onFinish: () => {
      refreshStatuses();
      onActivity();
    },
    onError: () => {
      refreshStatuses();
      onActivity();
    },
  });

  const busy = status === 'submitted' || status === 'streaming';
  const busyRef = useRef(busy);
  busyRef.current = busy;

  // The conversation exists on the server (with its title) once an answer streams.
  useEffect(() => {
    if (status === 'streaming') onActivity();
  }, [status, onActivity]);

  // Follow the answer while the reader is at the bottom.
  const scroller = useRef(null);
  const pinned = useRef(true);
  useEffect(() => {
    const element = scroller.current;
    if (element && pinned.current) element.scrollTop = element.scrollHeight;
  }, [messages, status]);

  const onStop = async () => {
    setStopping(true);
    try {
      // WorkflowChatTransport reconnects after a stream without `finish`,
      // which a stopped run's is, and would be told 410 (an error banner):
      // the page ends its side first. The demo's ON_DISCONNECT is "finish",
      // so that drop does not end the run; the stop request below does.
      if (WORKFLOW) await stop();
      await api.stop(chatId);
      // The server ends the stream itself (an abort chunk, then [DONE]).
      // Waiting for that keeps the run "stopped": aborting the fetch first
      // would look like a dropped connection to the server.
      const deadline = Date.now() + 3000;
      while (busyRef.current && Date.now() < deadline) await sleep(50);
    } catch {
      // Ending the fetch below is all that is left to do.
    } finally {
      await stop();
      setStopping(false);
      refreshStatuses();
    }
  };

  const send = text => {
    clearError();
    pinned.current = true;
    sendMessage({ text });
  };

  const lastAssistant = messages.findLast(m => m.role === 'assistant');

  return (
    <div className="chat" data-status={status}>
      <div
        className="messages"
        ref={scroller}
        onScroll={event => {
          const element = event.currentTarget;
          pinned.current = element.scrollHeight - element.scrollTop - element.clientHeight < 40;
        }}
      >
        {messages.length === 0 && (
          <div className="empty">
            <h2>Chat with the demo model</h2>
            <p>
              It runs offline and follows a few rules: it thinks aloud, calls tools for the weather and for
              arithmetic, counts for long streams, and asks before it sends an email. Try:
            </p>
            <div className="examples">
              {EXAMPLES.map(example => (
                <button key={example} type="button" onClick={() => send(example)}>
                  {example}
                </button>
              ))}
            </div>
          </div>
        )}
        {messages.map(message =>
          message.role === 'user' ? (
            <UserMessage
              key={message.id}
              message={message}
              editable={!busy}
              onEdit={(messageId, text) => {
                clearError();
                sendMessage({ text, messageId });
              }}
            />
          ) : message.role === 'assistant' ? (
            <AssistantMessage
              key={message.id}
              message={message}
              runStatus={runStatuses[message.id]}
              busy={busy}
              isLast={message === lastAssistant && message === messages[messages.length - 1]}
              onApproval={addToolApprovalResponse}
              onRegenerate={() => {
                clearError();
                regenerate({ messageId: message.id });
              }}
            />
          ) : null,
        )}
        {status === 'submitted' && (
          <div className="message assistant pending" aria-label="Waiting for the answer">
            <span className="dots">
              <i />
              <i />
              <i />
            </span>
          </div>
        )}
        {error && (
          <div className="error-banner" role="alert">
            <span>{errorText(error.message)}</span>
            <button type="button" onClick={clearError}>
              Dismiss
            </button>
          </div>
        )}
      </div>
      <Composer busy={busy} stopping={stopping} onSend={send} onStop={onStop} />
    </div>
  );
}
