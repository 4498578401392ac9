"""uistream: Django as the backend of AI chat front ends.

Streams chat turns and live tool-loop runs to the Vercel AI SDK's UI message
stream (ai@5, 6 and 7 clients) and AG-UI 1.0. ``uistream_app.protocol`` is
the sans-IO core and imports no Django.
"""

__version__ = "0.1.0"
