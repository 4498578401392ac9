// Talking to the Django side: the chat endpoints of uistream_app.urls and
// the conversations API (DRF), with Django's CSRF token on every unsafe
// request. The page is served by Django, which puts the endpoints' URLs and
// the token in <div id="root" data-...> (demo_project/templates/demo/index.html).

const root = document.getElementById('root');

// The demo's agents of other frameworks (demo_project/agents): /?agent=<fw>
// makes the page talk to that framework's chat; everything else is the same.
export const agentUrls = JSON.parse(document.getElementById('agent-urls')?.textContent ?? '{}');
const askedAgent = new URLSearchParams(window.location.search).get('agent');
export const agent = askedAgent && agentUrls[askedAgent] ? askedAgent : '';

// How the page talks to the chat: '' (HTTP, DefaultChatTransport), 'ws'
// (WebSocketChatTransport) or 'workflow' (WorkflowChatTransport): /?transport=.
export const TRANSPORTS = { '': 'HTTP', ws: 'WebSocket', workflow: 'Workflow' };
const askedTransport = new URLSearchParams(window.location.search).get('transport') ?? '';
export const transportName = askedTransport in TRANSPORTS ? askedTransport : '';

export const urls = {
  chat: agent ? agentUrls[agent] : (root?.dataset.chatUrl ?? '/api/chat'),
  conversations: root?.dataset.conversationsUrl ?? '/api/conversations/',
  runs: root?.dataset.runsUrl ?? '/api/runs/',
  admin: root?.dataset.adminUrl ?? '/admin/',
  ws: root?.dataset.wsUrl ?? '/ws/chat/',
};

function cookie(name) {
  for (const pair of document.cookie.split('; ')) {
    const at = pair.indexOf('=');
    if (pair.slice(0, at) === name) return decodeURIComponent(pair.slice(at + 1));
  }
  return undefined;
}

// The cookie wins over the page's copy: Django rotates the token at login.
export function csrfToken() {
  return cookie(root?.dataset.csrfCookieName ?? 'csrftoken') ?? root?.dataset.csrfToken ?? '';
}

export function csrfHeaders() {
  return { 'X-CSRFToken': csrfToken() };
}

// The text of a failed request: uistream answers {"error": {"message"}},
// DRF {"detail"}; anything else as it came.
export function errorText(raw) {
  try {
    const body = JSON.parse(raw);
    return body?.error?.message ?? body?.detail ?? raw;
  } catch {
    return raw;
  }
}

async function request(url, { method = 'GET', json, signal } = {}) {
  const headers = { Accept: 'application/json' };
  if (method !== 'GET') Object.assign(headers, csrfHeaders());
  if (json !== undefined) headers['Content-Type'] = 'application/json';
  const response = await fetch(url, {
    method,
    headers,
    body: json === undefined ? undefined : JSON.stringify(json),
    credentials: 'same-origin',
    signal,
  });
  if (response.status === 204) return null;
  const text = await response.text();
  if (!response.ok) {
    const error = new Error(errorText(text) || `${method} ${url}: ${response.status}`);
    error.status = response.status;
    throw error;
  }
  return text ? JSON.parse(text) : null;
}

const conversationUrl = id => `${urls.conversations}${encodeURIComponent(id)}/`;
const messageUrl = (id, messageId, what) =>
  `${conversationUrl(id)}messages/${encodeURIComponent(messageId)}/${what}`;

let reasons; // the promise of the feedback reasons, once asked

export const api = {
  listConversations: signal => request(`${urls.conversations}?page_size=100`, { signal }),
  renameConversation: (id, title) => request(conversationUrl(id), { method: 'PATCH', json: { title } }),
  deleteConversation: id => request(conversationUrl(id), { method: 'DELETE' }),

  // The current branch's stored messages as UIMessages (`messages`, for
  // useChat({ messages })), with the feedback given on them and the
  // versions of those that have several, both by message id. A chat the
  // server does not know is a 404 (`error.status`): someone else's, a
  // deleted one, or one made in this tab that has no message yet.
  async messages(id, signal) {
    const page = await request(`${conversationUrl(id)}messages/?page_size=1000`, { signal });
    return { messages: page.results, feedback: page.feedback ?? {}, versions: page.versions ?? {} };
  },

  // The reasons a down rating may give (the server's list), asked once.
  feedbackReasons() {
    reasons ??= request(`${urls.conversations}feedback-reasons`).then(
      body => body.reasons,
      error => {
        reasons = undefined; // asked again next time
        throw error;
      },
    );
    return reasons;
  },

  // Rate an answer ({rating: "up" | "down", reason?, comment?}): the
  // stored feedback comes back. A second rating changes the first.
  rate: (id, messageId, feedback) => request(messageUrl(id, messageId, 'feedback'), { method: 'POST', json: feedback }),
  unrate: (id, messageId) => request(messageUrl(id, messageId, 'feedback'), { method: 'DELETE' }),

  // Make the current branch go through version `number` (1-based) of a
  // message; 409 while an answer streams. The messages are to be loaded
  // again after it.
  switchVersion: (id, messageId, number) =>
    request(messageUrl(id, messageId, 'versions'), { method: 'POST', json: { version: number } }),

  // How each answer's run ended (message id -> "completed", "stopped"…):
  // the stored message itself does not say it was stopped.
  async runStatuses(id, signal) {
    const page = await request(`${urls.runs}?conversation=${encodeURIComponent(id)}&page_size=100`, { signal });
    const statuses = {};
    // Newest first: a message continued after an approval keeps its last run's.
    for (const run of page.results) statuses[run.message] ??= run.status;
    return statuses;
  },

  // Stop the answer on purpose (stored as "stopped"; a dropped connection
  // is not the same thing on the server).
  stop: id => request(`${urls.chat}/${encodeURIComponent(id)}/stop`, { method: 'POST' }),

  // Talk to the answer while it is written: `kind` "steer" (taken at the
  // next step boundary) or "queue" (when the model gave its final answer).
  // Resolves with the outcome: {type: "delivered", id, stepNumber} or
  // {type: "not-delivered", id, reason}.
  steer: (id, kind, steeringId, message) =>
    request(`${urls.chat}/${encodeURIComponent(id)}/${kind}`, { method: 'POST', json: { id: steeringId, message } }),
};
