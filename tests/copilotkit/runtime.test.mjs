// CopilotKit's runtime against uistream's AG-UI endpoint, driven the way
// CopilotKit's own client drives it: `CopilotKitCore` (@copilotkit/core)
// with the agent its React provider makes for a runtime URL
// (`ProxiedCopilotRuntimeAgent`, REST transport: POST <runtime>/agent/default/run),
// frontend tools run by the core, and an interrupt answered through the
// core's own interrupt state (`ɵInterruptState`, what `useInterrupt` uses),
// resumed as `useInterrupt` resumes.
//
// Needs the endpoint: tests/test_copilotkit.py starts the demo and runs this
// file with UISTREAM_AGUI_URL, UISTREAM_COOKIE and UISTREAM_CSRF set; without
// them every test is skipped.

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { CopilotKitCore, ProxiedCopilotRuntimeAgent, ɵInterruptState } from '@copilotkit/core';
import { z } from 'zod';
import { startRuntime } from './runtime.mjs';

const { UISTREAM_AGUI_URL: aguiUrl, UISTREAM_COOKIE: cookie, UISTREAM_CSRF: csrf } = process.env;

/** A client of the runtime, as the React provider makes one, on a thread of its own. */
function client(runtimeUrl, threadId, tools = []) {
  const agent = new ProxiedCopilotRuntimeAgent({ runtimeUrl, agentId: 'default' });
  // `agents__unsafe_dev_only` hands the core this agent: in a browser the
  // core makes the same one from the runtime's /info (which it fetches only
  // where there is a `window`).
  const core = new CopilotKitCore({ agents__unsafe_dev_only: { default: agent }, tools });
  const registered = core.getAgent('default');
  registered.threadId = threadId;
  const runs = [];
  const errors = [];
  // Each run's events, RUN_STARTED first.
  registered.subscribe({
    onEvent: ({ event }) => {
      if (event.type === 'RUN_STARTED') runs.push([]);
      runs.at(-1).push(event);
    },
  });
  core.subscribe({ onError: ({ error, code }) => void errors.push(`${code}: ${error.message}`) });
  return { core, agent: registered, runs, errors };
}

const types = events => events.map(e => e.type);
const last = events => events.at(-1);
const text = agent => agent.messages.filter(m => m.role === 'assistant' && m.content).map(m => m.content);

describe('CopilotKit runtime → uistream AG-UI endpoint', { skip: !aguiUrl && 'UISTREAM_AGUI_URL is not set' }, () => {
  let runtime;
  before(async () => {
    runtime = await startRuntime({ aguiUrl, cookie, csrf });
  });
  after(async () => {
    await runtime?.close();
  });

  test('a chat with a backend tool call, and the shared state carried across runs', async () => {
    const { core, agent, runs, errors } = client(runtime.runtimeUrl, 'ck-node-weather');
    agent.addMessage({ id: 'u1', role: 'user', content: "What's the weather in Paris?" });
    await core.runAgent({ agent });
    assert.deepEqual(errors, []);
    const [events] = runs;
    assert.equal(last(events).type, 'RUN_FINISHED');
    assert.equal(last(events).outcome, undefined);
    const calls = agent.messages.flatMap(m => m.toolCalls ?? []);
    assert.deepEqual(
      calls.map(c => [c.function.name, JSON.parse(c.function.arguments)]),
      [['get_weather', { city: 'Paris' }]],
    );
    const result = agent.messages.find(m => m.role === 'tool' && m.toolCallId === calls[0].id);
    assert.equal(JSON.parse(result.content).city, 'Paris');
    assert.match(text(agent).at(-1), /^In Paris it is -?\d+°C and /);
    // The state: the snapshot at the start, the delta at the end, folded by the client.
    const state = events.filter(e => e.type.startsWith('STATE_'));
    assert.deepEqual(
      state.map(e => e.snapshot ?? e.delta),
      [{ turns: 0 }, [{ op: 'replace', path: '/turns', value: 1 }]],
    );
    assert.deepEqual(agent.state, { turns: 1 });

    agent.addMessage({ id: 'u2', role: 'user', content: 'compute 6*7' });
    await core.runAgent({ agent });
    assert.deepEqual(errors, []);
    assert.match(text(agent).at(-1), /6\*7 = 42/);
    assert.deepEqual(agent.state, { turns: 2 });
  });

  test('a frontend tool: the model calls it, the client runs it, the run continues from its result', async () => {
    const colors = [];
    const changeBackground = {
      name: 'change_background',
      description: "Change the page's background colour.",
      parameters: z.object({ color: z.string() }),
      handler: async ({ color }) => {
        colors.push(color);
        return { color };
      },
    };
    const { core, agent, runs, errors } = client(runtime.runtimeUrl, 'ck-node-frontend', [changeBackground]);
    agent.addMessage({ id: 'u1', role: 'user', content: 'change the background to teal' });
    await core.runAgent({ agent });
    assert.deepEqual(errors, []);
    assert.deepEqual(colors, ['teal']);
    // The first run ends with the call pending on the client; the core runs
    // the tool and starts the follow-up run, which continues the same message.
    assert.equal(runs.length, 2);
    assert.deepEqual(last(runs[0]).outcome, undefined);
    assert.ok(types(runs[0]).includes('TOOL_CALL_END'));
    assert.ok(!types(runs[0]).includes('TOOL_CALL_RESULT'));
    assert.equal(last(runs[1]).type, 'RUN_FINISHED');
    assert.deepEqual(text(agent), ['The background is teal now.']);
    const [call] = agent.messages.flatMap(m => m.toolCalls ?? []);
    const results = agent.messages.filter(m => m.role === 'tool' && m.toolCallId === call.id);
    assert.deepEqual(results.map(m => JSON.parse(m.content)), [{ color: 'teal' }]);
  });

  for (const [answer, outcome] of [
    ['approve', /^Done: the email to ada@example\.com is sent/],
    ['cancel', /^I did not run send_email/],
  ]) {
    test(`an interrupt (a tool needing approval), answered "${answer}": the run continues`, async () => {
      const { core, agent, runs, errors } = client(runtime.runtimeUrl, `ck-node-interrupt-${answer}`);
      agent.addMessage({ id: 'u1', role: 'user', content: 'email ada@example.com saying hello' });
      await core.runAgent({ agent });
      assert.deepEqual(errors, []);
      const finished = last(runs[0]);
      assert.equal(finished.outcome.type, 'interrupt');
      const [interrupt] = finished.outcome.interrupts;
      assert.equal(interrupt.reason, 'tool_call');
      const [call] = agent.messages.flatMap(m => m.toolCalls ?? []);
      assert.equal(interrupt.toolCallId, call.id);
      assert.deepEqual(JSON.parse(call.function.arguments), { to: 'ada@example.com', body: 'hello' });
      assert.deepEqual(interrupt.responseSchema.required, ['approved']);

      if (answer === 'approve') {
        // A new message instead of an answer: the client refuses it itself,
        // as the endpoint would (409 interrupts_pending), and the interrupt
        // can still be answered.
        const held = [...agent.messages];
        agent.addMessage({ id: 'u2', role: 'user', content: 'never mind' });
        await core.runAgent({ agent });
        assert.equal(runs.length, 1, 'the refused request started no run');
        assert.deepEqual(errors, [
          `agent_run_failed: Thread has 1 pending interrupt(s) not addressed by resume: ${interrupt.id}`,
        ]);
        errors.length = 0;
        agent.setMessages(held);
      }

      // What useInterrupt does with the person's answer.
      const state = new ɵInterruptState();
      state.setStandard(finished.outcome.interrupts);
      const decision = answer === 'approve' ? state.resolve({ approved: true }) : state.cancel();
      assert.equal(decision.kind, 'resume');
      for (const { toolCallId, content } of decision.toolResults) {
        agent.addMessage({ id: `answer-${toolCallId}`, role: 'tool', toolCallId, content });
      }
      await core.runAgent({ agent, resume: decision.resume, runId: finished.runId });
      assert.deepEqual(errors, []);
      const resumed = runs[1];
      // useInterrupt resumes under the interrupted run's AG-UI run id; the
      // endpoint stores it as a run of its own.
      assert.equal(resumed[0].runId, finished.runId);
      assert.notEqual(resumed[0].metadata.uistream.runId, runs[0][0].metadata.uistream.runId);
      assert.equal(last(resumed).type, 'RUN_FINISHED');
      assert.equal(last(resumed).outcome, undefined);
      const [result] = resumed.filter(e => e.type === 'TOOL_CALL_RESULT');
      assert.equal(result.toolCallId, call.id);
      if (answer === 'approve') assert.equal(JSON.parse(result.content).status, 'sent');
      else assert.deepEqual(result.metadata, { uistream: { outcome: 'denied' } });
      assert.match(text(agent).at(-1), outcome);
      // The client's record of its answer gave way to the call's one result.
      assert.deepEqual(
        agent.messages.filter(m => m.role === 'tool').map(m => m.id),
        [`${call.id}-result`],
      );
    });
  }
});
