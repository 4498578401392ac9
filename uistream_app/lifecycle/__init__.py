"""The life of a run: from a turn to a settled row.

A transport's ``Turn`` is prepared and stored by ``store.py`` (its files by
``attachments.py``, the turn's set-up by ``turns.py``); ``runner.py`` starts the run, which
``executors.py`` may hand to a Celery worker; while it runs, ``registry.py``
knows it, ``leases.py`` renews its lease and settles the orphans of dead
processes, ``limits.py`` cuts it when it spends too much, and
``shutdown.py`` ends it in time on SIGTERM. Below them the process's
resources runs share: the sync lanes (``threads.py``), the WSGI portal's
event loop (``portal.py``), the MCP servers' sessions (``mcp.py``).
``spend.py`` totals what the runs of an owner spent. ``branches.py`` keeps
every attempt (a regenerate's, an edit's) on its branch and switches the
current one; ``feedback.py`` stores what a user thought of an answer.

docs/architecture.md, "The flow", walks through it.
"""
