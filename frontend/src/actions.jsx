// The controls under a message that talk to the conversations API rather
// than to useChat: an answer's rating (👍 / 👎, a down rating with a reason
// and a comment) and the "‹ 2/3 ›" that switches between a message's
// versions (every regenerate and edit is kept on the server). Everything
// shown is text, escaped by React: a comment or a reason is never HTML.

import { useEffect, useState } from 'react';
import { api } from './api.js';

// "not_safe" -> "Not safe": the server names reasons by their code.
const reasonLabel = reason => {
  const words = reason.replaceAll('_', ' ').replaceAll('-', ' ');
  return words.charAt(0).toUpperCase() + words.slice(1);
};

function FeedbackForm({ stored, busy, onSend, onClose }) {
  const [reasons, setReasons] = useState(null);
  const [failed, setFailed] = useState(null);
  const [reason, setReason] = useState(stored?.reason ?? '');
  const [comment, setComment] = useState(stored?.comment ?? '');
  useEffect(() => {
    let live = true;
    api.feedbackReasons().then(
      list => live && setReasons(list),
      error => live && setFailed(error.message),
    );
    return () => {
      live = false;
    };
  }, []);
  return (
    <form
      className="feedback-form"
      aria-label="Feedback"
      onSubmit={event => {
        event.preventDefault();
        onSend({ rating: 'down', reason, comment: comment.trim() });
      }}
    >
      <label>
        <span>What was wrong?</span>
        <select aria-label="Reason" value={reason} onChange={event => setReason(event.target.value)}>
          <option value="">{reasons === null && !failed ? 'Loading…' : 'No reason given'}</option>
          {(reasons ?? []).map(code => (
            <option key={code} value={code}>
              {reasonLabel(code)}
            </option>
          ))}
        </select>
      </label>
      {failed && <span className="feedback-error">{failed}</span>}
      <textarea
        aria-label="Comment"
        placeholder="Tell us more (optional)"
        value={comment}
        onChange={event => setComment(event.target.value)}
      />
      <div className="feedback-form-buttons">
        <button type="submit" className="send-feedback" disabled={busy}>
          Send feedback
        </button>
        <button type="button" onClick={onClose}>
          Close
        </button>
      </div>
    </form>
  );
}

// 👍, or 👎 turned over: drawn, not an emoji, which a system without an
// emoji font shows as an empty box.
function Thumb({ down = false }) {
  return (
    <svg viewBox="0 0 24 24" width="16" height="16" aria-hidden="true">
      <path
        d="M7 10v11M2 12v7a2 2 0 0 0 2 2h12.3a2 2 0 0 0 2-1.7l1.4-8A2 2 0 0 0 17.7 9H14V5a3 3 0 0 0-3-3L7 10H4a2 2 0 0 0-2 2z"
        transform={down ? 'rotate(180 12 12)' : undefined}
        fill="none"
        stroke="currentColor"
        strokeWidth="1.8"
        strokeLinecap="round"
        strokeLinejoin="round"
      />
    </svg>
  );
}

// The rating of one answer. `feedback` is what the server holds (or
// undefined); `onRate(body)` and `onUnrate()` return promises that settle
// once the server answered. A click on 👎 stores the down rating at once
// (a click is a rating, whether or not the form is sent), then asks why.
export function FeedbackButtons({ feedback, onRate, onUnrate }) {
  const [asking, setAsking] = useState(false);
  const [pending, setPending] = useState(false);
  const [error, setError] = useState(null);
  const rating = feedback?.rating;

  const act = async (call, after) => {
    setPending(true);
    setError(null);
    try {
      await call();
      after?.();
    } catch (failure) {
      setError(failure.message);
    } finally {
      setPending(false);
    }
  };

  const up = () => act(rating === 'up' ? onUnrate : () => onRate({ rating: 'up' }), () => setAsking(false));
  const down = () =>
    rating === 'down' ? act(onUnrate, () => setAsking(false)) : act(() => onRate({ rating: 'down' }), () => setAsking(true));

  return (
    <div className="feedback" data-rating={rating ?? ''}>
      <span className="feedback-buttons">
        <button
          type="button"
          className="rate-up"
          aria-label="Rate up"
          title="Good answer"
          aria-pressed={rating === 'up'}
          disabled={pending}
          onClick={up}
        >
          <Thumb />
        </button>
        <button
          type="button"
          className="rate-down"
          aria-label="Rate down"
          title="Bad answer"
          aria-pressed={rating === 'down'}
          disabled={pending}
          onClick={down}
        >
          <Thumb down />
        </button>
      </span>
      {rating === 'down' && !asking && (feedback.reason || feedback.comment) && (
        <span className="feedback-note">
          {feedback.reason && <span className="feedback-reason">{reasonLabel(feedback.reason)}</span>}
          {feedback.comment && <span className="feedback-comment">{feedback.comment}</span>}
          <button type="button" className="feedback-change" onClick={() => setAsking(true)}>
            Change
          </button>
        </span>
      )}
      {error && (
        <span className="feedback-error" role="alert">
          {error}
        </span>
      )}
      {rating === 'down' && asking && (
        <FeedbackForm
          stored={feedback}
          busy={pending}
          onSend={body => act(() => onRate(body), () => setAsking(false))}
          onClose={() => setAsking(false)}
        />
      )}
    </div>
  );
}

// "‹ 2/3 ›": which of a message's versions is shown, and the buttons to the
// one before and after it. `versions` is the server's {count, current};
// `onSwitch(number)` switches and loads the messages again.
export function VersionSwitcher({ versions, disabled, onSwitch }) {
  const { count, current } = versions;
  return (
    <span className="versions" role="group" aria-label="Versions">
      <button
        type="button"
        aria-label="Previous version"
        title="Previous version"
        disabled={disabled || current <= 1}
        onClick={() => onSwitch(current - 1)}
      >
        ‹
      </button>
      <span className="versions-count">
        {current}/{count}
      </span>
      <button
        type="button"
        aria-label="Next version"
        title="Next version"
        disabled={disabled || current >= count}
        onClick={() => onSwitch(current + 1)}
      >
        ›
      </button>
    </span>
  );
}
