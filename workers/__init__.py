"""blkreview engine: trace parsers, the block-layer replay model and analyzers.

Pure Python + numpy. Importing ``workers`` loads neither Django nor Celery, so
``python -m workers`` works without the web; the Celery app lives in ``workers.celery``.
"""
