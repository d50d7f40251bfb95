"""Storage on a real S3-compatible server (SeaweedFS started on loopback by the ``seaweedfs``
fixture): STORAGE_URL parsing, multipart streaming uploads with their checksum and limit,
streamed local copies for the worker, the health check, and one bundle analyzed end to end with
nothing written under MEDIA_ROOT."""

from __future__ import annotations

import hashlib
import io
import os
from pathlib import Path

import pytest

from reviewapp.storage_config import (
    LOCAL_BACKEND,
    S3_BACKEND,
    StorageUrlError,
    storage_backend,
)

# --- STORAGE_URL (no server) ------------------------------------------------------------------


def test_storage_url_default_and_file_are_local():
    """Nothing set: the local backend following MEDIA_ROOT; file:// names a directory."""
    assert storage_backend({}) == {"BACKEND": LOCAL_BACKEND}
    assert storage_backend({"STORAGE_URL": "file:///srv/media"}) == {
        "BACKEND": LOCAL_BACKEND, "OPTIONS": {"location": "/srv/media"}}


def test_storage_url_s3_with_inline_endpoint_and_credentials():
    """s3+http://KEY:SECRET@HOST:PORT/BUCKET carries everything, path-style addressing."""
    b = storage_backend({"STORAGE_URL": "s3+http://AK:S%2Fk@10.1.2.3:8333/media?region=eu-1",
                         "AWS_LOCATION": "blk"})
    o = b["OPTIONS"]
    assert b["BACKEND"] == S3_BACKEND
    assert (o["bucket_name"], o["endpoint_url"], o["access_key"], o["secret_key"]) == (
        "media", "http://10.1.2.3:8333", "AK", "S/k")
    assert (o["region_name"], o["location"], o["addressing_style"]) == ("eu-1", "blk", "path")
    assert o["transfer_config"].multipart_chunksize == 8 * 1024 * 1024


def test_storage_url_s3_bucket_with_aws_environment():
    """s3://BUCKET takes the endpoint and keys from the usual AWS_* variables;
    AWS_STORAGE_BUCKET_NAME alone selects S3 too."""
    env = {"AWS_ACCESS_KEY_ID": "k", "AWS_SECRET_ACCESS_KEY": "s",
           "AWS_S3_ENDPOINT_URL": "https://s3.example.org", "BLKREVIEW_S3_MULTIPART_MB": "16"}
    o = storage_backend({**env, "STORAGE_URL": "s3://traces"})["OPTIONS"]
    assert (o["bucket_name"], o["endpoint_url"], o["access_key"]) == (
        "traces", "https://s3.example.org", "k")
    assert o["transfer_config"].multipart_threshold == 16 * 1024 * 1024
    b = storage_backend({**env, "AWS_STORAGE_BUCKET_NAME": "other"})
    assert b["BACKEND"] == S3_BACKEND and b["OPTIONS"]["bucket_name"] == "other"


@pytest.mark.parametrize("url", ["ftp://x/y", "s3://", "s3+http://127.0.0.1:8333/"])
def test_storage_url_rejects_what_it_cannot_use(url):
    """An unknown scheme or a missing bucket is a clear configuration error."""
    with pytest.raises(StorageUrlError):
        storage_backend({"STORAGE_URL": url})


# --- against SeaweedFS -------------------------------------------------------------------------


def _keys(server, prefix: str = "") -> list[str]:
    out = server.client().list_objects_v2(Bucket=server.bucket, Prefix=prefix)
    return [o["Key"] for o in out.get("Contents", [])]


def test_save_stream_multipart_to_s3_with_checksum(s3_storage, tmp_path):
    """A 20 MiB upload streams to the bucket in multipart parts (ETag "-3"), with the sha256
    and size of the bytes read once; nothing is written under MEDIA_ROOT."""
    from django.conf import settings

    from reviewapp import storage

    data = os.urandom(20 * 1024 * 1024 + 123)
    src = tmp_path / "big.bin"
    src.write_bytes(data)
    before = set(Path(settings.MEDIA_ROOT).rglob("*"))
    with open(src, "rb") as fh:
        name, sha, size = storage.save_stream(fh, remaining=1 << 40)
    assert (sha, size) == (hashlib.sha256(data).hexdigest(), len(data))
    prefix = os.environ["AWS_LOCATION"]
    key = f"{prefix}/{name}"
    assert key in _keys(s3_storage, prefix + "/traces/")
    head = s3_storage.client().head_object(Bucket=s3_storage.bucket, Key=key)
    assert head["ContentLength"] == len(data)
    assert head["ETag"].strip('"').endswith("-3")  # 8 + 8 + 4 MiB parts
    with storage.local_copy(name) as path:
        assert hashlib.sha256(path.read_bytes()).hexdigest() == sha
        assert not str(path).startswith(str(settings.MEDIA_ROOT))
    assert not path.exists()  # the temporary copy is gone
    assert set(Path(settings.MEDIA_ROOT).rglob("*")) == before


def test_save_stream_over_limit_leaves_nothing_in_s3(s3_storage):
    """Past the limit the upload stops with UploadTooLarge and no object remains."""
    from reviewapp import storage

    prefix = os.environ["AWS_LOCATION"] + "/traces/"
    before = set(_keys(s3_storage, prefix))
    with pytest.raises(storage.UploadTooLarge):
        storage.save_stream(io.BytesIO(b"x" * (9 * 1024 * 1024)), remaining=8 * 1024 * 1024 + 5)
    assert set(_keys(s3_storage, prefix)) == before


def test_storage_health_s3_ok_and_wrong_secret(s3_storage, seaweedfs):
    """/healthz's storage part: ok against the server, a readable failure with a wrong key."""
    from django.test.utils import override_settings

    from reviewapp import storage
    from tests.conftest import s3_storages

    assert storage.storage_health() == {"ok": True, "backend": "s3", "error": ""}
    bad = seaweedfs.storage_url.replace(seaweedfs.secret_key, "wrong-secret")
    with override_settings(STORAGES=s3_storages(bad)):
        health = storage.storage_health()
    assert health == {"ok": False, "backend": "s3", "error": "storage unreachable"}


@pytest.mark.django_db
def test_healthz_reports_s3_storage(client, s3_storage, seaweedfs):
    """/healthz: storage ok against SeaweedFS; with a wrong secret 503 and storage down,
    without the endpoint or the key in the answer."""
    from django.test.utils import override_settings

    from tests.conftest import s3_storages

    r = client.get("/healthz")
    assert r.status_code == 200 and r.json()["storage"] == "ok"
    bad = seaweedfs.storage_url.replace(seaweedfs.secret_key, "wrong-secret")
    with override_settings(STORAGES=s3_storages(bad)):
        r = client.get("/healthz")
    assert r.status_code == 503 and r.json()["storage"] == "down"
    assert str(seaweedfs.s3_port) not in r.content.decode() and "wrong" not in r.content.decode()


def test_ensure_bucket_creates_a_missing_bucket(seaweedfs):
    """``manage.py init_storage`` creates the bucket of a fresh server."""
    from django.core.management import call_command
    from django.test.utils import override_settings

    from reviewapp import storage
    from tests.conftest import s3_storages

    url = seaweedfs.storage_url.rsplit("/", 1)[0] + f"/fresh-{os.getpid()}"
    with override_settings(STORAGES=s3_storages(url)):
        assert storage.storage_health()["ok"] is False
        out = io.StringIO()
        call_command("init_storage", stdout=out)
        assert "bucket created" in out.getvalue()
        assert storage.ensure_bucket() is False
        assert storage.storage_health()["ok"] is True


@pytest.mark.django_db
def test_bundle_upload_and_analysis_on_s3(s3_storage, make_upload, seed000_before, user):
    """bundle_create streams to the bucket; the analysis reads it back from there and stores
    its EventTable .npz there; MEDIA_ROOT stays empty."""
    from django.conf import settings
    from django.core.files.storage import default_storage

    from reviewapp.models import AnalysisJob, BundleResult
    from reviewapp.services.bundles import bundle_create
    from reviewapp.tasks import run_analysis

    before = set(Path(settings.MEDIA_ROOT).rglob("*"))
    bundle, _ = bundle_create(files=[make_upload("before.txt", seed000_before)],
                              role="baseline", user=user)
    f = bundle.files.get()
    prefix = os.environ["AWS_LOCATION"]
    assert f"{prefix}/{f.storage_name}" in _keys(s3_storage, prefix + "/traces/")
    job = AnalysisJob.objects.get(bundle=bundle)
    assert run_analysis(job.pk) == "succeeded"
    result = BundleResult.objects.get(bundle=bundle)
    assert f"{prefix}/{result.events_name}" in _keys(s3_storage, prefix + "/tables/")
    assert default_storage.exists(result.events_name)
    assert result.data["devices"]["8,0"]["sizes"]["count"] > 0
    assert set(Path(settings.MEDIA_ROOT).rglob("*")) == before
