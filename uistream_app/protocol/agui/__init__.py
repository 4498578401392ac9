"""AG-UI 1.0, the second wire dialect: no Django, no I/O.

* ``events``: the event vocabulary (wire dicts) and ``validate_event``;
* ``renderer``: ``AGUIRenderer``, canonical UI chunks → AG-UI SSE bytes;
* ``handles``: ``RunContext`` and its emit handles, for agents written
  directly against AG-UI, and ``run_agent``;
* ``source``: such an agent as a source of events for the canonical log;
* ``verifier``: ``AGUIVerifier``, the rules both real clients enforce;
* ``input``: ``RunAgentInput`` parsed strictly;
* ``resume``: what a continuation answers (approvals, client tool results);
* ``messages``: AG-UI messages ⇄ stored ``UIMessage``\\ s;
* ``reducer``: ``fold_messages``, the messages a client builds from a
  stream;
* ``patch``: JSON Patch for ``STATE_DELTA``.
"""
