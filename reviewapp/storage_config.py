"""Where uploaded bundles and parsed tables live: a local directory or an S3-compatible bucket.

Pure (no Django import) so that settings.py, the test set-up and the docs' examples share one
parser. ``storage_backend(environ)`` returns the ``STORAGES["default"]`` entry:

* nothing set, or ``STORAGE_URL=file:///srv/blkreview/media``: Django's FileSystemStorage in
  ``MEDIA_ROOT`` (the embedded default; one host, or a volume every worker mounts).
* ``STORAGE_URL=s3://BUCKET`` with the usual ``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``,
  ``AWS_S3_ENDPOINT_URL`` (any S3-compatible server: SeaweedFS, MinIO, Ceph RGW, AWS itself)
  and ``AWS_S3_REGION_NAME``; or everything in one URL:
  ``STORAGE_URL=s3+http://KEY:SECRET@127.0.0.1:8333/BUCKET`` (``s3+https://`` for TLS).
  ``AWS_STORAGE_BUCKET_NAME`` alone (no ``STORAGE_URL``) selects S3 too.
  Optional: ``AWS_LOCATION`` (a key prefix inside the bucket),
  ``BLKREVIEW_S3_MULTIPART_MB`` (part size and threshold of multipart uploads, default 8).

Through django-storages' S3 backend: uploads stream to the bucket in multipart parts (never
whole in memory), workers stream objects back into a temporary file
(:func:`reviewapp.storage.local_copy`), so web and workers share nothing but the bucket.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

S3_BACKEND = "storages.backends.s3.S3Storage"
LOCAL_BACKEND = "django.core.files.storage.FileSystemStorage"


class StorageUrlError(ValueError):
    """STORAGE_URL cannot be understood."""


def _s3_options(*, bucket: str, environ: Mapping[str, str], endpoint: str | None = None,
                access_key: str | None = None, secret_key: str | None = None,
                query: Mapping[str, list[str]] | None = None) -> dict[str, Any]:
    query = query or {}

    def q(name: str, env: str) -> str | None:
        return (query.get(name) or [None])[0] or environ.get(env) or None

    part_mb = float(environ.get("BLKREVIEW_S3_MULTIPART_MB") or 8)
    options: dict[str, Any] = {
        "bucket_name": bucket,
        "endpoint_url": endpoint or environ.get("AWS_S3_ENDPOINT_URL") or None,
        "access_key": access_key or environ.get("AWS_ACCESS_KEY_ID") or None,
        "secret_key": secret_key or environ.get("AWS_SECRET_ACCESS_KEY") or None,
        "region_name": q("region", "AWS_S3_REGION_NAME") or "us-east-1",
        "location": (q("location", "AWS_LOCATION") or "").strip("/"),
        # Names are generated (uuid), never overwritten; no ACLs (bucket policy decides);
        # no signed URLs are handed out (pages never link to stored objects).
        "file_overwrite": True,
        "default_acl": None,
        "querystring_auth": False,
        "signature_version": "s3v4",
        # path-style (http://host/bucket/key) works with every S3-compatible server on an IP
        "addressing_style": q("addressing_style", "AWS_S3_ADDRESSING_STYLE") or "path",
    }
    from boto3.s3.transfer import TransferConfig  # only needed (and installed) for S3

    part = int(part_mb * 1024 * 1024)
    options["transfer_config"] = TransferConfig(multipart_threshold=part,
                                                multipart_chunksize=part, max_concurrency=4)
    return options


def storage_backend(environ: Mapping[str, str]) -> dict[str, Any]:
    """The ``STORAGES["default"]`` entry for this environment (see the module docstring).

    The local backend without a ``file://`` URL has no fixed location: it follows
    ``settings.MEDIA_ROOT``.

    Raises:
        StorageUrlError: an unknown scheme, or an S3 URL without a bucket.
    """
    url = (environ.get("STORAGE_URL") or "").strip()
    if not url:
        bucket = environ.get("AWS_STORAGE_BUCKET_NAME")
        if bucket:
            return {"BACKEND": S3_BACKEND, "OPTIONS": _s3_options(bucket=bucket, environ=environ)}
        return {"BACKEND": LOCAL_BACKEND}
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme == "file":
        path = unquote(parts.path)
        return {"BACKEND": LOCAL_BACKEND, "OPTIONS": {"location": path}} if path else \
            {"BACKEND": LOCAL_BACKEND}
    if scheme == "s3":
        bucket = parts.netloc or parts.path.strip("/")
        if not bucket:
            raise StorageUrlError("STORAGE_URL=s3://BUCKET needs a bucket name")
        return {"BACKEND": S3_BACKEND,
                "OPTIONS": _s3_options(bucket=bucket, environ=environ,
                                       query=parse_qs(parts.query))}
    if scheme in ("s3+http", "s3+https"):
        bucket = parts.path.strip("/").split("/")[0]
        if not bucket or not parts.hostname:
            raise StorageUrlError(f"STORAGE_URL={scheme}://KEY:SECRET@HOST:PORT/BUCKET needs "
                                  "a host and a bucket")
        host = parts.hostname if ":" not in parts.hostname else f"[{parts.hostname}]"
        endpoint = f"{scheme[3:]}://{host}" + (f":{parts.port}" if parts.port else "")
        return {"BACKEND": S3_BACKEND,
                "OPTIONS": _s3_options(
                    bucket=bucket, environ=environ, endpoint=endpoint,
                    access_key=unquote(parts.username) if parts.username else None,
                    secret_key=unquote(parts.password) if parts.password else None,
                    query=parse_qs(parts.query))}
    raise StorageUrlError(f"STORAGE_URL: unknown scheme {scheme!r} (file, s3, s3+http, s3+https)")


def is_s3(backend: Mapping[str, Any]) -> bool:
    return backend.get("BACKEND") == S3_BACKEND
