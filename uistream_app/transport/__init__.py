"""The way a request comes in and its answer goes out.

Every stream endpoint is a ``StreamView`` (``pipeline.py``): one pipeline,
one order of checks, one way of refusing (docs/architecture.md, "The request
pipeline"). Then each dialect has its module: useChat over HTTP
(``chat_views.py``, its body read by ``chat_request.py``) and over a
WebSocket (``chat_consumer.py``), AG-UI (``agui_views.py``); a stored file is
served by ``file_views.py``, and ``body_limits.py`` refuses a body over the
limit before the application reads it. A transport parses its request into a
``Turn`` and hands it to ``lifecycle/``; it never writes the database itself.

A project imports these names from ``uistream_app.views``,
``uistream_app.consumers`` and ``uistream_app.asgi``.
"""
