"""The Celery app: ``celery -A workers.celery worker -Q analysis,replay,notify,celery``.

Configuration comes from Django settings under the ``CELERY_`` namespace (reviewapp/settings.py):
JSON only, acks_late, prefetch 1, soft/hard time limits, tasks routed to the analysis, replay
and notify queues (BLKREVIEW_*_QUEUE).
The broker is CELERY_BROKER_URL / REDIS_URL, or kombu's filesystem transport in the embedded
default. The engine never imports this module, and this module imports nothing from the web
side: the tasks (reviewapp/tasks.py) are autodiscovered by name (import-linter contracts in
pyproject.toml).
"""

from __future__ import annotations

import os

from celery import Celery
from celery.signals import setup_logging

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "reviewapp.settings")

app = Celery("blkreview")
app.config_from_object("django.conf:settings", namespace="CELERY")
# The tasks live on the web side (reviewapp/tasks.py): found by name, never imported from here.
app.autodiscover_tasks(lambda: ["reviewapp"], related_name="tasks")


@setup_logging.connect
def _use_django_logging(**kwargs: object) -> None:
    """Let the worker log through Django's LOGGING instead of Celery's own setup."""
    from logging.config import dictConfig

    from django.conf import settings

    dictConfig(settings.LOGGING)
