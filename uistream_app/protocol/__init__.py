"""The protocol core: source events, SSE, the UI message stream (``ui``) and AG-UI (``agui``).

Sans-IO and free of Django and Channels (``tests/test_layering.py`` checks
it): events and chunks in, chunks, bytes or verdicts out. The wire facts it
keeps are written down in docs/protocols.md.
"""
