"""The Vercel AI SDK's UI message stream: chunks, encoder, renderers, reader, replay, verifiers.

``chunks`` is the ai@7 vocabulary; ``encoder`` and ``stream`` turn source
events into chunks; ``render`` turns chunks into SSE for ai@7, ai@6 and
ai@5 clients; ``reader`` builds the ``UIMessage`` the client builds;
``replay`` turns a stored message back into chunks; ``verify`` checks a
stream against the clients' rules.
"""
