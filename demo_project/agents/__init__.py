"""The demo's agents of other frameworks: one chat per framework, each a
``ChatView`` subclass whose ``agent`` is that framework's own agent on that
framework's own offline test model, mounted at ``/api/agents/<fw>/chat``
(``urls.py``). They behave as the demo model does (``script.py``)."""
