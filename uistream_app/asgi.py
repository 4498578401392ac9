"""The ASGI wrappers a project puts around its application (its
``asgi.py``; the demo's does)::

    from uistream_app.asgi import bounded_threads, limit_request_bodies

    application = bounded_threads(limit_request_bodies(get_asgi_application()))

``bounded_threads`` (``lifecycle/threads.py``) runs every HTTP request's
sync work on the lanes the runs share (docs/operations.md, "Threads");
``limit_request_bodies`` (``transport/body_limits.py``) refuses a body over
``MAX_REQUEST_BYTES`` as soon as it passes it (docs/operations.md, "Body
limits").
"""

from __future__ import annotations

from .lifecycle.threads import bounded_threads
from .transport.body_limits import limit_request_bodies

__all__ = [
    "bounded_threads",
    "limit_request_bodies",
]
