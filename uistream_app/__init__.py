"""uistream: Django as the backend of AI chat front ends.

Streams chat turns and live tool-loop runs to the Vercel AI SDK's UI message
stream (ai@5, 6 and 7 clients) and AG-UI 1.0. The folders are the rooms of
the house (docs/architecture.md, "Rooms"): ``protocol/`` is the wire (sans-IO,
no Django), ``runs/`` the tool loop and the providers (no Django),
``adapters/`` other frameworks' agents; ``transport/`` is the way a request
comes in, ``lifecycle/`` the life of a run, ``live/`` and ``recording/`` a
run in flight and its stored log; ``inspect/`` and ``api/`` read what was
stored. At the top stay Django's own names and what a project imports:
``hooks``, ``policies``, ``history``, ``errors``, ``owners``, ``testing``,
and the faces ``views``, ``consumers`` and ``asgi``.
"""

__version__ = "0.1.0"
