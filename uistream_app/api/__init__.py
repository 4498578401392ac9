"""The conversations API (Django REST framework): what a chat front end
needs besides the stream itself.

* ``conversations/``: list (paginated; ``search``, ``ordering``,
  ``updated_after``/``updated_before``) and create;
* ``conversations/<id>/``: retrieve, rename (``PATCH {"title": ...}``),
  delete;
* ``conversations/<id>/messages/``: the current branch's messages as
  ``UIMessage`` objects, ready for ``useChat({ messages })``, with the
  page's ``feedback`` and ``versions`` beside them, by message id;
* ``conversations/<id>/messages/<message id>/feedback``: ``POST`` rates an
  answer (``{"rating": "up" | "down", "reason", "comment"}``; 201, then 200
  when it changes it), ``DELETE`` takes the rating back;
  ``conversations/feedback-reasons`` lists the reasons;
* ``conversations/<id>/messages/<message id>/versions``: a regenerated
  answer's or an edited question's versions (``GET``), and ``POST
  {"version": N}`` makes the current branch go through the N-th;
* ``runs/`` (``conversation``, ``status``, ``model`` filters) and
  ``runs/<id>/``: a stored run, never its ``error_detail``;
* ``runs/<id>/transcript/<format>/``: the run's wire in any registered
  dialect (``ai7``, ``ai6``, ``ai5``…) or its log as JSON lines;
* ``schema/``: the OpenAPI schema (drf-spectacular), for staff unless
  ``UISTREAM["SCHEMA_PUBLIC"]``.

The views set their DRF configuration themselves (``base_views``: the
schema class, renderers, parsers, no versioning, paging and filters), so a
project adds no ``rest_framework``, ``drf_spectacular`` or
``REST_FRAMEWORK`` for them; authentication, throttles and the exception
handler follow the project's ``REST_FRAMEWORK``.

Ownership is the chat views' own (``Owner``, ``owned_by``): a signed-in user
owns their conversations; with ``UISTREAM["ALLOW_ANONYMOUS"]`` an
anonymous visitor owns the session's. Staff are no exception here (the
admin is theirs). Someone else's conversation or run is a 404, the same
answer as a missing one.
"""
