// One UIMessage part each: text, reasoning (folded), tool calls as cards
// with their state (and Approve / Deny while a call waits for a person),
// sources, files and data parts. An answer's text is Markdown, rendered by
// Streamdown (made for Markdown that is still arriving: an unclosed code
// fence or table renders as far as it goes); Streamdown sanitizes it, and
// nothing the model said is ever put in as raw HTML. A user's text is shown
// as typed.

import { code } from '@streamdown/code';
import { getToolName, isToolUIPart } from 'ai';
import { Streamdown } from 'streamdown';

const TOOL_STATES = {
  'input-streaming': 'preparing',
  'input-available': 'running',
  'approval-requested': 'needs approval',
  'approval-responded': 'answered',
  'output-available': 'done',
  'output-error': 'failed',
  'output-denied': 'denied',
};

// A flat object on one line (wrapped at its commas on a narrow screen),
// anything deeper indented.
function Json({ value }) {
  if (value === undefined) return null;
  if (typeof value === 'string') return <pre className="json">{value}</pre>;
  const flat =
    value !== null &&
    typeof value === 'object' &&
    !Array.isArray(value) &&
    Object.values(value).every(v => v === null || typeof v !== 'object');
  const text = flat
    ? `{${Object.entries(value)
        .map(([k, v]) => `${JSON.stringify(k)}: ${JSON.stringify(v)}`)
        .join(', ')}}`
    : JSON.stringify(value, null, 2);
  return <pre className="json">{text}</pre>;
}

export function Reasoning({ part }) {
  const streaming = part.state === 'streaming';
  return (
    <details className="reasoning" data-state={part.state ?? 'done'}>
      <summary>{streaming ? 'Thinking…' : 'Reasoning'}</summary>
      <div className="reasoning-text">{part.text}</div>
    </details>
  );
}

export function ToolCard({ part, onApproval, busy }) {
  const name = getToolName(part);
  const label = TOOL_STATES[part.state] ?? part.state;
  return (
    <div className="tool-card" data-tool={name} data-state={part.state}>
      <div className="tool-head">
        <span className="tool-icon" aria-hidden="true">
          ⚙
        </span>
        <span className="tool-name">{part.title ?? name}</span>
        <span className={`badge badge-${part.state}`}>{label}</span>
      </div>
      {part.input !== undefined && (
        <div className="tool-section">
          <div className="tool-label">Input</div>
          <Json value={part.input} />
        </div>
      )}
      {part.state === 'approval-requested' && (
        <div className="approval">
          <p>
            <strong>{name}</strong> needs your approval to run
            {part.approval?.requestReason ? `: ${part.approval.requestReason}` : '.'}
          </p>
          <div className="approval-buttons">
            <button
              type="button"
              className="approve"
              disabled={busy}
              onClick={() => onApproval({ id: part.approval.id, approved: true })}
            >
              Approve
            </button>
            <button
              type="button"
              className="deny"
              disabled={busy}
              onClick={() => onApproval({ id: part.approval.id, approved: false, reason: 'Denied in the demo page.' })}
            >
              Deny
            </button>
          </div>
        </div>
      )}
      {part.state === 'approval-responded' && (
        <div className="tool-note">{part.approval?.approved ? 'Approved: running…' : 'Denied.'}</div>
      )}
      {part.approval?.isAutomatic && part.state !== 'approval-requested' && (
        <div className="tool-note">
          {part.approval.approved ? 'Approved' : 'Denied'} automatically by the approval policy
          {part.approval.reason ? `: ${part.approval.reason}` : '.'}
        </div>
      )}
      {part.state === 'output-available' && (
        <div className="tool-section">
          <div className="tool-label">Output{part.preliminary ? ' (preliminary)' : ''}</div>
          <Json value={part.output} />
        </div>
      )}
      {part.state === 'output-error' && <div className="tool-error">{part.errorText}</div>}
      {part.state === 'output-denied' && (
        <div className="tool-note">
          {part.approval?.isAutomatic ? 'The tool did not run.' : `Denied${part.approval?.reason ? `: ${part.approval.reason}` : ''}. The tool did not run.`}
        </div>
      )}
    </div>
  );
}

function Sources({ parts }) {
  if (parts.length === 0) return null;
  return (
    <div className="sources">
      <div className="tool-label">Sources</div>
      <ol>
        {parts.map(part => (
          <li key={part.sourceId}>
            {part.type === 'source-url' && /^https?:/i.test(part.url) ? (
              <a href={part.url} target="_blank" rel="noopener noreferrer">
                {part.title || part.url}
              </a>
            ) : (
              <span>{part.title || part.url || part.filename}</span>
            )}
          </li>
        ))}
      </ol>
    </div>
  );
}

const MARKDOWN_PLUGINS = { code };

function Markdown({ part }) {
  return (
    <div className="text markdown">
      <Streamdown
        plugins={MARKDOWN_PLUGINS}
        isAnimating={part.state === 'streaming'}
        mode={part.state === 'streaming' ? 'streaming' : 'static'}
        controls={{ table: false }}
        linkSafety={{ enabled: false }}
      >
        {part.text}
      </Streamdown>
    </div>
  );
}

// Where a file part may point: the server's own file URLs (/api/files/<id>
// once stored), http(s), or an image inline (before the server stores it).
const SAFE_FILE_URL = /^(https?:|data:image\/|\/(?!\/))/i;

function FilePart({ part }) {
  const safe = SAFE_FILE_URL.test(part.url ?? '');
  if (safe && part.mediaType?.startsWith('image/')) {
    return <img className="file-image" src={part.url} alt={part.filename ?? 'image'} />;
  }
  return (
    <div className="file-part">
      {safe ? <a href={part.url}>{part.filename ?? part.mediaType}</a> : (part.filename ?? part.mediaType)}
    </div>
  );
}

// A message the person sent while the answer was being written, where the
// answer took it in (between two steps): shown as theirs, inside the answer.
function SteeringPart({ part }) {
  return (
    <div className="steering-message" data-steering-id={part.id}>
      <div className="tool-label">You, meanwhile</div>
      {part.parts.map((inner, index) =>
        inner.type === 'file' ? (
          <FilePart key={index} part={inner} />
        ) : (
          <div key={index} className="steering-text">
            {inner.text}
          </div>
        ),
      )}
    </div>
  );
}

export function MessageParts({ message, onApproval, busy, markdown = false }) {
  const sources = message.parts.filter(p => p.type === 'source-url' || p.type === 'source-document');
  return (
    <>
      {message.parts.map((part, index) => {
        const key = `${message.id}-${index}`;
        if (part.type === 'text') {
          if (markdown) return <Markdown key={key} part={part} />;
          return (
            <div key={key} className="text">
              {part.text}
            </div>
          );
        }
        if (part.type === 'reasoning') return <Reasoning key={key} part={part} />;
        if (isToolUIPart(part)) return <ToolCard key={key} part={part} onApproval={onApproval} busy={busy} />;
        if (part.type === 'file') return <FilePart key={key} part={part} />;
        if (part.type === 'steering-message') return <SteeringPart key={key} part={part} />;
        if (part.type.startsWith('data-')) {
          return (
            <div key={key} className="data-part">
              <div className="tool-label">{part.type.slice(5)}</div>
              <Json value={part.data} />
            </div>
          );
        }
        return null; // step-start, sources (below), and what this page does not show
      })}
      <Sources parts={sources} />
    </>
  );
}
