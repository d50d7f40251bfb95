# blkreview: one image for the web (gunicorn + whitenoise) and the Celery worker.
FROM python:3.11-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1

# blktrace: blkparse/btt for maintainers who inspect traces inside the container.
RUN apt-get update \
    && apt-get install -y --no-install-recommends blktrace curl \
    && rm -rf /var/lib/apt/lists/*

WORKDIR /app
# Exactly the locked versions (make lock), checked against their hashes; then the project.
COPY requirements.lock ./
RUN pip install --require-hashes -r requirements.lock
COPY pyproject.toml README.md ./
COPY workers ./workers
COPY reviewapp ./reviewapp
COPY templates ./templates
COPY manage.py ./
RUN pip install --no-deps .

RUN useradd --create-home --uid 1000 blkreview \
    && mkdir -p /data/media /app/staticfiles \
    && chown -R blkreview /data /app/staticfiles
USER blkreview

ENV MEDIA_ROOT=/data/media \
    STATIC_ROOT=/app/staticfiles
RUN SECRET_KEY=collectstatic-only python manage.py collectstatic --noinput

EXPOSE 8000
# reviewapp/gunicorn_conf.py: the hooks of Prometheus multiprocess mode (PROMETHEUS_MULTIPROC_DIR)
CMD ["gunicorn", "-c", "python:reviewapp.gunicorn_conf", "reviewapp.wsgi:application", "--bind", "0.0.0.0:8000", "--workers", "3", "--timeout", "120"]
