"""WSGI entry point: ``gunicorn reviewapp.wsgi:application``.

The Django application is wrapped in :class:`reviewapp.chunked.ChunkedBodyMiddleware`, so a
``Transfer-Encoding: chunked`` upload is read like one with a Content-Length (gunicorn) or
answered 411 (servers that do not decode chunks).
"""

import os

from django.core.wsgi import get_wsgi_application

from reviewapp.chunked import ChunkedBodyMiddleware

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "reviewapp.settings")
application = ChunkedBodyMiddleware(get_wsgi_application())
