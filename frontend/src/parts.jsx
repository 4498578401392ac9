// One UIMessage part each: text, reasoning (folded), tool calls as cards
// with their state (and Approve / Deny while a call waits for a person),
// sources, files and data parts. Everything the model said is rendered as
// text: React escapes it, and no part is ever put in as HTML.

import { getToolName, isToolUIPart } from 'ai';

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

function FilePart({ part }) {
  const safe = /^(https?:|data:image\/)/i.test(part.url);
  if (safe && part.mediaType?.startsWith('image/')) {
    return <img className="file-image" src={part.url} alt={part.filename ?? 'image'} />;
  }
  return (
    <div className="file-part">
      📎 {safe ? <a href={part.url}>{part.filename ?? part.mediaType}</a> : (part.filename ?? part.mediaType)}
    </div>
  );
}

export function MessageParts({ message, onApproval, busy }) {
  const sources = message.parts.filter(p => p.type === 'source-url' || p.type === 'source-document');
  return (
    <>
      {message.parts.map((part, index) => {
        const key = `${message.id}-${index}`;
        if (part.type === 'text') {
          return (
            <div key={key} className="text">
              {part.text}
            </div>
          );
        }
        if (part.type === 'reasoning') return <Reasoning key={key} part={part} />;
        if (isToolUIPart(part)) return <ToolCard key={key} part={part} onApproval={onApproval} busy={busy} />;
        if (part.type === 'file') return <FilePart key={key} part={part} />;
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
