// One conversation on useChat: the stored messages come in as `messages`,
// `resume: true` picks up an answer that is still streaming (after a
// reload, say), stop goes through the server's stop endpoint, and approvals
// are sent by the chat itself once every pending call is answered. Files
// chosen in the composer go with the message as file parts. Each answer can
// be rated, and a message with several versions (a regenerate, an edit)
// switches between them through the API: the messages are loaded again
// after a switch, and the versions after each answer.

import { useChat } from '@ai-sdk/react';
import {
  DefaultChatTransport,
  WebSocketChatTransport,
  isToolUIPart,
  lastAssistantMessageIsCompleteWithApprovalResponses,
} from 'ai';
import { WorkflowChatTransport } from '@workflow/ai';
import { useCallback, useEffect, useMemo, useRef, useState } from 'react';
import { FeedbackButtons, VersionSwitcher } from './actions.jsx';
import { agent, api, csrfHeaders, errorText, transportName, urls } from './api.js';
import { MessageParts } from './parts.jsx';

const EXAMPLES = [
  "What's the weather in Paris and Rome?",
  'compute 12 * (3 + 4)',
  'count to 50',
  'count to 300 slowly',
  'email ada@example.com saying hello',
  'email ada@trusted.test saying hello',
  'research tides',
  'show a table',
];

const RUN_BADGES = { stopped: 'Stopped', cancelled: 'Connection lost', failed: 'Failed' };

// `/?transport=workflow`: Vercel's WorkflowChatTransport instead of the
// default one. It reconnects by itself when a stream ends without `finish`
// (GET chat/<run id>/stream?startIndex=N), and after a reload by the run id
// this tab remembers from the POST's x-workflow-run-id header.
const WORKFLOW = transportName === 'workflow';
// `/?transport=ws`: ai@7's WebSocketChatTransport on the demo's /ws/chat/
// (Channels). The socket's handshake carries the page's cookies, so the
// chats are the same visitor's; stop and the lists stay on HTTP.
const WEBSOCKET = transportName === 'ws' && !agent;
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

function webSocketTransport() {
  const scheme = window.location.protocol === 'https:' ? 'wss:' : 'ws:';
  return new WebSocketChatTransport({ url: `${scheme}//${window.location.host}${urls.ws}` });
}

const sleep = ms => new Promise(resolve => setTimeout(resolve, ms));

function textOf(message) {
  return message.parts
    .filter(p => p.type === 'text')
    .map(p => p.text)
    .join('');
}

// A FileList of `files`: what sendMessage turns into file parts (data
// URLs, read by the SDK itself).
function fileList(files) {
  const transfer = new DataTransfer();
  for (const file of files) transfer.items.add(file);
  return transfer.files;
}

function Attachment({ file, onRemove }) {
  const preview = useMemo(() => (file.type.startsWith('image/') ? URL.createObjectURL(file) : null), [file]);
  useEffect(() => () => preview && URL.revokeObjectURL(preview), [preview]);
  return (
    <li className="attachment" data-filename={file.name}>
      {preview && <img src={preview} alt={file.name} />}
      <span className="attachment-name">{file.name}</span>
      <button type="button" aria-label={`Remove ${file.name}`} onClick={onRemove}>
        ✕
      </button>
    </li>
  );
}

const OUTCOME_WORDS = {
  finished: 'the answer had ended',
  'stop-condition': 'the answer reached its step limit',
  'waiting-for-tool-results': 'the answer waits for you (an approval)',
  aborted: 'the answer was stopped',
  error: 'the answer failed',
};

// What became of a message sent while the answer was written.
function SteeringOutcomes({ outcomes }) {
  if (outcomes.length === 0) return null;
  return (
    <ul className="steering-outcomes" aria-label="Messages sent while answering">
      {outcomes.map(({ id, kind, text, outcome, error }) => (
        <li key={id} data-steering-id={id} data-outcome={outcome?.type ?? (error ? 'failed' : 'pending')}>
          <span className="steering-kind">{kind === 'queue' ? 'Queued' : 'Steered'}</span> “{text}”:{' '}
          {error
            ? error
            : !outcome
              ? kind === 'queue'
                ? 'waits for the final answer…'
                : 'waits for the next step…'
              : outcome.type === 'delivered'
                ? `delivered at step ${outcome.stepNumber}`
                : `not delivered: ${OUTCOME_WORDS[outcome.reason] ?? outcome.reason}`}
        </li>
      ))}
    </ul>
  );
}

// While an answer streams the input stays usable: Enter steers the answer
// (the model reads the message at its next step), Queue sends it once the
// answer is final; Stop stops.
function Composer({ busy, stopping, onSend, onStop, onSteer }) {
  const [input, setInput] = useState('');
  const [files, setFiles] = useState([]);
  const picker = useRef(null);
  const ready = input.trim() || files.length > 0;
  const submit = (event, kind = 'steer') => {
    event.preventDefault();
    if (!ready) return;
    if (busy) {
      if (!input.trim()) return;
      onSteer(kind, input.trim());
    } else {
      onSend(input.trim(), files);
      setFiles([]);
    }
    setInput('');
  };
  return (
    <form className="composer" onSubmit={submit}>
      {files.length > 0 && (
        <ul className="attachments" aria-label="Attachments">
          {files.map((file, index) => (
            <Attachment
              key={`${file.name}-${file.size}-${file.lastModified}`}
              file={file}
              onRemove={() => setFiles(files.filter((_, i) => i !== index))}
            />
          ))}
        </ul>
      )}
      <div className="composer-row">
        <input
          ref={picker}
          type="file"
          multiple
          hidden
          aria-label="Attach files"
          onChange={event => {
            setFiles([...files, ...event.target.files]);
            event.target.value = '';
          }}
        />
        <button
          type="button"
          className="attach"
          title="Attach files"
          aria-label="Attach"
          disabled={busy}
          onClick={() => picker.current.click()}
        >
          <svg viewBox="0 0 24 24" width="20" height="20" aria-hidden="true">
            <path
              d="M21 11.5l-8.6 8.6a5.5 5.5 0 0 1-7.8-7.8l8.6-8.6a3.7 3.7 0 0 1 5.2 5.2l-8.6 8.6a1.8 1.8 0 0 1-2.6-2.6l7.9-7.9"
              fill="none"
              stroke="currentColor"
              strokeWidth="2"
              strokeLinecap="round"
              strokeLinejoin="round"
            />
          </svg>
        </button>
        <textarea
          aria-label="Message"
          placeholder={busy ? 'Steer the answer: Enter, or Queue for after it…' : 'Ask the demo model something…'}
          rows={1}
          value={input}
          onChange={event => setInput(event.target.value)}
          onKeyDown={event => {
            if (event.key === 'Enter' && !event.shiftKey && !event.nativeEvent.isComposing) submit(event);
          }}
        />
        {busy ? (
          <>
            <button type="button" className="queue" onClick={event => submit(event, 'queue')} disabled={!input.trim()}>
              Queue
            </button>
            <button type="button" className="stop" onClick={onStop} disabled={stopping}>
              {stopping ? 'Stopping…' : 'Stop'}
            </button>
          </>
        ) : (
          <button type="submit" className="send" disabled={!ready}>
            Send
          </button>
        )}
      </div>
    </form>
  );
}

function UserMessage({ message, editable, onEdit, versions, switching, onSwitch }) {
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
      {(editable || versions) && (
        <div className="message-actions">
          {versions && <VersionSwitcher versions={versions} disabled={switching} onSwitch={onSwitch} />}
          {editable && (
            <button type="button" className="edit" onClick={() => setDraft(textOf(message))}>
              Edit
            </button>
          )}
        </div>
      )}
    </div>
  );
}

// An answer that still waits for a person (a tool call to approve, or
// approved and about to go on) is not finished: nothing to regenerate yet.
const waitsForApproval = message =>
  message.parts.some(p => isToolUIPart(p) && (p.state === 'approval-requested' || p.state === 'approval-responded'));

function AssistantMessage({
  message,
  runStatus,
  busy,
  isLast,
  onApproval,
  onRegenerate,
  feedback,
  onRate,
  onUnrate,
  versions,
  switching,
  onSwitch,
}) {
  const badge = RUN_BADGES[runStatus];
  const canRegenerate = isLast && !busy && !waitsForApproval(message);
  // The answer on its way is not rated yet (nor stored whole).
  const streaming = isLast && busy;
  return (
    <div className="message assistant" data-message-id={message.id} data-run-status={runStatus ?? ''}>
      <MessageParts message={message} onApproval={onApproval} busy={busy} markdown />
      {(badge || canRegenerate || versions || !streaming) && (
        <div className="message-actions">
          {versions && <VersionSwitcher versions={versions} disabled={switching} onSwitch={onSwitch} />}
          {badge && <span className={`badge badge-run-${runStatus}`}>{badge}</span>}
          {!streaming && <FeedbackButtons feedback={feedback} onRate={onRate} onUnrate={onUnrate} />}
          {canRegenerate && (
            <button type="button" className="regenerate" onClick={onRegenerate}>
              Regenerate
            </button>
          )}
        </div>
      )}
    </div>
  );
}

export function ChatPane({ chatId, initialMessages, initialFeedback, initialVersions, initialStatuses, onActivity }) {
  const transport = useMemo(
    () =>
      WORKFLOW
        ? workflowTransport(chatId)
        : WEBSOCKET
          ? webSocketTransport()
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
  // By message id, as the messages page gives them: the feedback on each
  // rated answer, and {count, current} for each message with several versions.
  const [feedback, setFeedback] = useState(initialFeedback);
  const [versions, setVersions] = useState(initialVersions);
  const [switching, setSwitching] = useState(false);
  const [actionError, setActionError] = useState(null);

  const refreshStatuses = useCallback(() => {
    api.runStatuses(chatId).then(setRunStatuses, () => {});
  }, [chatId]);

  // After a regenerate's or an edit's answer: it made a new version, whose
  // "‹ 2/2 ›" the page learns from the messages page.
  const newVersion = useRef(false);
  const refreshVersions = useCallback(() => {
    if (!newVersion.current) return;
    newVersion.current = false;
    api.messages(chatId).then(
      page => {
        setVersions(page.versions);
        setFeedback(page.feedback);
      },
      () => {},
    );
  }, [chatId]);

  // The socket goes with the chat pane (a later request opens a new one).
  useEffect(() => () => transport instanceof WebSocketChatTransport && transport.close(), [transport]);

  const {
    messages,
    setMessages,
    sendMessage,
    status,
    error,
    stop,
    regenerate,
    addToolApprovalResponse,
    clearError,
  } = useChat({
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
      refreshVersions();
      onActivity();
    },
    onError: () => {
      refreshStatuses();
      refreshVersions();
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

  // Show another version of a message: the server moves the current
  // branch through it (and, below it, the replies last shown there), and
  // the page loads that branch.
  const switchVersion = async (messageId, number) => {
    setSwitching(true);
    setActionError(null);
    try {
      await api.switchVersion(chatId, messageId, number);
      const page = await api.messages(chatId);
      setMessages(page.messages);
      setVersions(page.versions);
      setFeedback(page.feedback);
      refreshStatuses();
    } catch (failure) {
      setActionError(failure.message);
    } finally {
      setSwitching(false);
    }
  };

  const rate = async (messageId, body) => {
    const stored = await api.rate(chatId, messageId, body);
    setFeedback(current => ({ ...current, [messageId]: stored }));
  };

  const unrate = async messageId => {
    await api.unrate(chatId, messageId);
    setFeedback(current => {
      const { [messageId]: _gone, ...rest } = current;
      return rest;
    });
  };

  const send = (text, files = []) => {
    clearError();
    pinned.current = true;
    sendMessage(files.length > 0 ? { text: text || undefined, files: fileList(files) } : { text });
  };

  // A message for the answer being written (steer or queue): the page shows
  // its outcome when the server knows it (the POST answers then).
  const [steered, setSteered] = useState([]);
  const steer = async (kind, text) => {
    const id = `steer-${crypto.randomUUID()}`;
    const message = { id: `msg-${crypto.randomUUID()}`, role: 'user', parts: [{ type: 'text', text }] };
    const note = change => setSteered(current => current.map(item => (item.id === id ? { ...item, ...change } : item)));
    setSteered(current => [...current.slice(-4), { id, kind, text }]);
    try {
      note({ outcome: await api.steer(chatId, kind, id, message) });
    } catch (failure) {
      note({ error: failure.message });
    }
  };

  const lastAssistant = messages.findLast(m => m.role === 'assistant');
  const lastMessage = messages[messages.length - 1];
  // A question with no answer after it: the request failed before the
  // server took it (nothing was stored), or the page was left meanwhile.
  const unanswered = !busy && lastMessage?.role === 'user';

  // Ask again: a question the server never took is sent again as it was
  // (under a new id); a failed answer is regenerated.
  const retry = () => {
    clearError();
    pinned.current = true;
    if (lastMessage?.role === 'user') {
      setMessages(messages.slice(0, -1));
      sendMessage({ parts: lastMessage.parts, metadata: lastMessage.metadata });
    } else {
      newVersion.current = true;
      regenerate();
    }
  };

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
                newVersion.current = true;
                sendMessage({ text, messageId });
              }}
              versions={versions[message.id]}
              switching={busy || switching}
              onSwitch={number => switchVersion(message.id, number)}
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
                newVersion.current = true;
                regenerate({ messageId: message.id });
              }}
              feedback={feedback[message.id]}
              onRate={body => rate(message.id, body)}
              onUnrate={() => unrate(message.id)}
              versions={versions[message.id]}
              switching={busy || switching}
              onSwitch={number => switchVersion(message.id, number)}
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
        {actionError && (
          <div className="error-banner" role="alert">
            <span className="error-text">{actionError}</span>
            <span className="error-actions">
              <button type="button" onClick={() => setActionError(null)}>
                Dismiss
              </button>
            </span>
          </div>
        )}
        {error ? (
          <div className="error-banner" role="alert">
            <span className="error-text">{errorText(error.message)}</span>
            <span className="error-actions">
              {!busy && (
                <button type="button" className="retry" onClick={retry}>
                  Retry
                </button>
              )}
              <button type="button" onClick={clearError}>
                Dismiss
              </button>
            </span>
          </div>
        ) : (
          unanswered && (
            <div className="unanswered">
              <span>No answer to this message.</span>
              <button type="button" className="retry" onClick={retry}>
                Retry
              </button>
            </div>
          )
        )}
      </div>
      <SteeringOutcomes outcomes={steered} />
      <Composer busy={busy} stopping={stopping} onSend={send} onStop={onStop} onSteer={steer} />
    </div>
  );
}
