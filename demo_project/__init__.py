import os

if os.environ.get("UISTREAM_DEMO_EXECUTOR") == "celery":
    # The Celery app, loaded with Django so that runs are sent to its broker.
    from .celery import app as celery_app

    __all__ = ["celery_app"]
