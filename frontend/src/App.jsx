// The page: the visitor's conversations (the DRF API) beside the open chat.
// The open chat's id is in the address (?chat=ID), so a reload comes back to
// it: its stored messages are loaded, then useChat resumes an answer that is
// still streaming. On a narrow screen the list folds away behind a button.

import { generateId } from 'ai';
import { useCallback, useEffect, useRef, useState } from 'react';
import { TRANSPORTS, agent, agentUrls, api, transportName, urls } from './api.js';
import { ChatPane } from './Chat.jsx';

// The chat ids this tab made for new chats: until its first message the
// server does not know such a chat, and a reload of it is an empty chat,
// not a "not found".
const MADE_HERE = 'uistream-new-chats';

function madeHere() {
  try {
    return new Set(JSON.parse(sessionStorage.getItem(MADE_HERE) ?? '[]'));
  } catch {
    return new Set();
  }
}

function rememberMade(id) {
  const ids = [...madeHere(), id].slice(-50);
  sessionStorage.setItem(MADE_HERE, JSON.stringify(ids));
}

const NOTHING_STORED = { messages: [], feedback: {}, versions: {}, statuses: {} };

function chatIdFromAddress() {
  return new URLSearchParams(window.location.search).get('chat');
}

function showChat(id, { replace = false } = {}) {
  const url = new URL(window.location.href);
  url.searchParams.set('chat', id);
  window.history[replace ? 'replaceState' : 'pushState']({ chat: id }, '', url);
}

function ago(iso) {
  const seconds = Math.max(0, (Date.now() - new Date(iso).getTime()) / 1000);
  if (seconds < 60) return 'just now';
  if (seconds < 3600) return `${Math.floor(seconds / 60)} min ago`;
  if (seconds < 86400) return `${Math.floor(seconds / 3600)} h ago`;
  return new Date(iso).toLocaleDateString();
}

function ConversationItem({ conversation, active, onOpen, onRename, onDelete }) {
  const [draft, setDraft] = useState(null);
  if (draft !== null) {
    return (
      <li className="conversation active">
        <form
          className="rename"
          onSubmit={event => {
            event.preventDefault();
            setDraft(null);
            if (draft.trim()) onRename(conversation.id, draft.trim());
          }}
        >
          <input aria-label="Title" value={draft} onChange={event => setDraft(event.target.value)} autoFocus />
          <button type="submit">OK</button>
        </form>
      </li>
    );
  }
  return (
    <li className={`conversation${active ? ' active' : ''}`} data-chat-id={conversation.id}>
      <button type="button" className="open" onClick={() => onOpen(conversation.id)}>
        <span className="title">{conversation.title || 'Untitled chat'}</span>
        <span className="meta">
          {conversation.message_count} messages · {ago(conversation.updated_at)}
        </span>
      </button>
      <span className="item-actions">
        <button type="button" title="Rename" aria-label="Rename" onClick={() => setDraft(conversation.title)}>
          ✎
        </button>
        <button type="button" title="Delete" aria-label="Delete" onClick={() => onDelete(conversation.id)}>
          ✕
        </button>
      </span>
    </li>
  );
}

const AGENT_NAMES = { 'pydantic-ai': 'pydantic-ai', langgraph: 'LangGraph', 'openai-agents': 'OpenAI Agents SDK' };

// How the page talks to the chat (see api.js); a choice reloads the page
// on the same chat.
function TransportPicker() {
  const choose = value => {
    const url = new URL(window.location.href);
    if (value) url.searchParams.set('transport', value);
    else url.searchParams.delete('transport');
    window.location.assign(url);
  };
  return (
    <select
      className="transport-picker"
      aria-label="Transport"
      value={transportName}
      onChange={event => choose(event.target.value)}
    >
      {Object.entries(TRANSPORTS).map(([value, name]) => (
        // The framework agents' chats are HTTP views: no socket for them.
        <option key={value} value={value} disabled={value === 'ws' && !!agent}>
          {name}
        </option>
      ))}
    </select>
  );
}

// Which agent answers: the demo model, or one of the frameworks' agents.
// Choosing one opens a new chat under ?agent=<fw>.
function AgentPicker() {
  const choose = value => {
    const url = new URL(window.location.href);
    url.searchParams.delete('chat');
    if (value) url.searchParams.set('agent', value);
    else url.searchParams.delete('agent');
    window.location.assign(url);
  };
  return (
    <select className="agent-picker" aria-label="Agent" value={agent} onChange={event => choose(event.target.value)}>
      <option value="">Demo model</option>
      {Object.keys(agentUrls).map(fw => (
        <option key={fw} value={fw}>
          {AGENT_NAMES[fw] ?? fw}
        </option>
      ))}
    </select>
  );
}

export function App() {
  // Ids made here for new chats: nothing to load for them.
  const fresh = useRef(new Set());
  const [chatId, setChatId] = useState(() => {
    const id = chatIdFromAddress();
    if (id) return id;
    const made = generateId();
    fresh.current.add(made);
    rememberMade(made);
    return made;
  });
  const [conversations, setConversations] = useState([]);
  const [listError, setListError] = useState(null);
  const [loaded, setLoaded] = useState(null); // {chatId, messages, feedback, versions, statuses}
  const [loadError, setLoadError] = useState(null);
  const [notFound, setNotFound] = useState(null); // the chat id the server does not know
  const [menuOpen, setMenuOpen] = useState(false);

  const refreshList = useCallback(() => {
    api.listConversations().then(
      page => {
        setConversations(page.results);
        setListError(null);
      },
      error => setListError(error.message),
    );
  }, []);

  useEffect(() => {
    if (!chatIdFromAddress()) showChat(chatId, { replace: true });
    refreshList();
    const onPop = () => {
      const id = chatIdFromAddress();
      if (id) fresh.current.delete(id);
      setChatId(id ?? generateId());
    };
    window.addEventListener('popstate', onPop);
    return () => window.removeEventListener('popstate', onPop);
    // Once, on mount.
  }, []);

  // The open chat's stored messages (with their feedback and versions,
  // and how its answers ended), before useChat starts on them.
  useEffect(() => {
    const controller = new AbortController();
    setLoadError(null);
    setNotFound(null);
    if (fresh.current.has(chatId)) {
      setLoaded({ chatId, ...NOTHING_STORED });
      return undefined;
    }
    setLoaded(null);
    Promise.all([api.messages(chatId, controller.signal), api.runStatuses(chatId, controller.signal)]).then(
      ([page, statuses]) => setLoaded({ chatId, ...page, statuses }),
      error => {
        if (error.name === 'AbortError') return;
        if (error.status !== 404) setLoadError(error.message);
        else if (madeHere().has(chatId)) setLoaded({ chatId, ...NOTHING_STORED });
        // Someone else's chat reads the same as a missing one (the server
        // says 404 for both).
        else setNotFound(chatId);
      },
    );
    return () => controller.abort();
  }, [chatId]);

  const open = (id, { isNew = false } = {}) => {
    if (isNew) {
      fresh.current.add(id);
      rememberMade(id);
    }
    else fresh.current.delete(id);
    if (id !== chatId) {
      showChat(id);
      setChatId(id);
    }
    setMenuOpen(false);
  };

  const newChat = () => open(generateId(), { isNew: true });

  const rename = async (id, title) => {
    try {
      await api.renameConversation(id, title);
    } catch (error) {
      window.alert(error.message);
    }
    refreshList();
  };

  const remove = async id => {
    try {
      await api.deleteConversation(id);
    } catch (error) {
      window.alert(error.message);
      return;
    }
    refreshList();
    if (id === chatId) newChat();
  };

  const current = conversations.find(c => c.id === chatId);

  return (
    <div className={`app${menuOpen ? ' menu-open' : ''}`}>
      <aside className="sidebar" aria-label="Conversations">
        <div className="sidebar-head">
          <span className="brand">uistream</span>
          <button type="button" className="new-chat" onClick={newChat}>
            + New chat
          </button>
        </div>
        {listError && <div className="list-error">{listError}</div>}
        <ul className="conversations">
          {conversations.map(conversation => (
            <ConversationItem
              key={conversation.id}
              conversation={conversation}
              active={conversation.id === chatId}
              onOpen={open}
              onRename={rename}
              onDelete={remove}
            />
          ))}
          {conversations.length === 0 && !listError && <li className="none">No conversations yet.</li>}
        </ul>
        <div className="sidebar-foot">
          <a href={urls.admin}>Admin: stored runs and their transcripts</a>
        </div>
      </aside>
      <button
        type="button"
        className="scrim"
        aria-label="Close the conversation list"
        tabIndex={-1}
        onClick={() => setMenuOpen(false)}
      />
      <main className="main">
        <header className="topbar">
          <button
            type="button"
            className="menu"
            aria-label="Conversations"
            aria-expanded={menuOpen}
            onClick={() => setMenuOpen(!menuOpen)}
          >
            ☰
          </button>
          <h1>{notFound === chatId ? 'Chat not found' : current?.title || 'New chat'}</h1>
          <TransportPicker />
          <AgentPicker />
        </header>
        {loadError && (
          <div className="error-banner" role="alert">
            {loadError}
          </div>
        )}
        {notFound === chatId ? (
          <div className="not-found" role="alert">
            <h2>Chat not found</h2>
            <p>There is no chat {chatId} for you: it was deleted, or it is someone else's.</p>
            <button type="button" className="new-chat" onClick={newChat}>
              + New chat
            </button>
          </div>
        ) : loaded?.chatId === chatId ? (
          <ChatPane
            key={chatId}
            chatId={chatId}
            initialMessages={loaded.messages}
            initialFeedback={loaded.feedback}
            initialVersions={loaded.versions}
            initialStatuses={loaded.statuses}
            onActivity={refreshList}
          />
        ) : (
          !loadError && <div className="loading">Loading…</div>
        )}
      </main>
    </div>
  );
}
