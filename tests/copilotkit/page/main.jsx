// A page on CopilotKit's React client, talking to CopilotKit's runtime
// (tests/copilotkit/runtime.mjs, same origin), whose AG-UI agent is
// uistream's endpoint: the chat (@copilotkit/react-ui's CopilotChat), a
// frontend tool (useFrontendTool: change_background), the shared state
// (useCoAgent: the demo's {"turns": N}) and the human-in-the-loop interrupt
// (useInterrupt: AG-UI's RUN_FINISHED interrupt outcome, answered here).

import { CopilotKit, useCoAgent, useFrontendTool, useRenderToolCall } from '@copilotkit/react-core';
import { useInterrupt } from '@copilotkit/react-core/v2';
import { CopilotChat } from '@copilotkit/react-ui';
import '@copilotkit/react-ui/styles.css';
import { useState } from 'react';
import { createRoot } from 'react-dom/client';

/** The open interrupt (a tool call waiting for a person), answered as its responseSchema says. */
function Approval({ interrupt, resolve, cancel }) {
  return (
    <section role="dialog" aria-label="Approval" data-interrupt-id={interrupt.id}>
      <p>The agent wants to call a tool ({interrupt.toolCallId}) and needs your approval.</p>
      <button onClick={() => resolve({ approved: true })}>Approve</button>
      <button onClick={() => cancel()}>Deny</button>
    </section>
  );
}

/** Every tool call in the chat, backend or frontend: name, input, status, result. */
function ToolCard({ name, args, status, result }) {
  return (
    <figure aria-label={`Tool call ${name}`} data-status={status}>
      <figcaption>{name}</figcaption>
      <code aria-label="Input">{JSON.stringify(args)}</code>
      {result !== undefined && <output aria-label="Result">{JSON.stringify(result)}</output>}
    </figure>
  );
}

function Page() {
  const [background, setBackground] = useState('white');
  const { state } = useCoAgent({ name: 'default', initialState: {} });
  useFrontendTool({
    name: 'change_background',
    description: "Change the page's background colour.",
    parameters: [{ name: 'color', type: 'string', description: 'A CSS colour', required: true }],
    handler: async ({ color }) => {
      setBackground(color);
      return { color };
    },
  });
  useRenderToolCall({ name: '*', render: props => <ToolCard {...props} /> });
  const approval = useInterrupt({
    renderInChat: false,
    render: ({ interrupt, resolve, cancel }) => <Approval interrupt={interrupt} resolve={resolve} cancel={cancel} />,
  });
  return (
    <main data-background={background} style={{ background, minHeight: '100vh' }}>
      <p>
        Turns: <output aria-label="Turns">{state?.turns ?? '–'}</output>
      </p>
      {approval}
      <CopilotChat labels={{ initial: 'Ask the uistream demo.' }} />
    </main>
  );
}

const runtimeUrl = new URL('api/copilotkit', window.location.href).pathname;

createRoot(document.getElementById('root')).render(
  <CopilotKit runtimeUrl={runtimeUrl} agent="default" showDevConsole={false}>
    <Page />
  </CopilotKit>,
);
