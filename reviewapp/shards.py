"""Parallel ingest of a huge bundle: its trace files parsed by several workers at once.

When a bundle is larger than ``BLKREVIEW_PARALLEL_INGEST_MB`` and holds at least two trace
files (per-CPU blktrace files, several captures), the analysis task becomes the coordinator:

1. it sends one ``reviewapp.tasks.parse_shard`` task per trace file to the analysis queue;
2. every shard is claimed exactly once (Redis ``SET NX`` with a lease), by a shard task on any
   worker or by the coordinator itself, which parses unclaimed shards while it waits, so one
   worker alone finishes the job and N workers share the parsing;
3. a claimer parses its file (:func:`workers.traces.shards.parse_shard`) and stores the part
   (lossless bytes) under ``shards/job-<id>-a<attempt>/<file id>.part``;
4. the coordinator merges every part with ``ingest(parsed=...)``, which is exactly the
   single-task merge (one comm map and genesis across per-CPU files, time order, manifest),
   then analyzes and stores as usual, and deletes the parts.

A claim whose lease ran out without a part (its worker died) is taken over by the coordinator;
when the merge has everything, every claim is held until its lease ends, so a shard task that
is delivered late finds its file taken and does nothing.
A shard that fails to parse leaves no part; the coordinator parses that file itself and fails
the job with the same readable error the single-task path gives. Without Redis (the embedded
default's filesystem broker) bundles are always ingested in one task.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import socket
import time
from collections.abc import Sequence
from typing import Any

from django.conf import settings

log = logging.getLogger(__name__)

TRACE_FORMATS_SKIP = ("manifest", "sysfs-queue", "mdstat", "tar", "zip", "empty")


def _redis() -> Any:
    broker = str(settings.CELERY_BROKER_URL)
    if not broker.startswith(("redis://", "rediss://")):
        return None
    import redis

    return redis.Redis.from_url(broker, socket_timeout=10)


def shardable_files(files: Sequence[Any]) -> list[Any]:
    """The files a shard may parse: non-empty top-level traces (not archives or manifests)."""
    return [f for f in files if f.size > 0 and (f.format or "") not in TRACE_FORMATS_SKIP]


def wanted(files: Sequence[Any]) -> bool:
    """Whether this bundle is ingested in parallel (size threshold, >= 2 shards, Redis)."""
    limit = float(settings.BLKREVIEW_PARALLEL_INGEST_MB) * 1024 * 1024
    if limit < 0 or sum(f.size for f in files) <= limit:
        return False
    return len(shardable_files(files)) >= 2 and _redis() is not None


def part_name(job_id: int, attempt: int, file_id: int) -> str:
    return f"shards/job-{job_id}-a{attempt}/{file_id}.part"


def _key(job_id: int, attempt: int, file_id: int) -> str:
    return f"blkreview:shard:{job_id}:{attempt}:{file_id}"


def _claim(r: Any, job_id: int, attempt: int, file_id: int) -> bool:
    me = f"{socket.gethostname()}:{os.getpid()}"
    return bool(r.set(_key(job_id, attempt, file_id), me, nx=True,
                      ex=int(settings.BLKREVIEW_SHARD_LEASE_SECONDS)))


def _manifest(files: Sequence[Any], strict: bool) -> tuple[Any, bool]:
    """The bundle's manifest from its manifest files only (small; the traces stay remote)."""
    from pathlib import Path

    from reviewapp import storage
    from workers.traces.manifest import build_manifest

    mfiles = [f for f in files if (f.format or "") in ("manifest", "sysfs-queue", "mdstat")]
    if not mfiles:
        return None, strict
    with contextlib.ExitStack() as stack:
        entries = [(Path(stack.enter_context(storage.local_copy(f.storage_name))), f.name,
                    f.format) for f in mfiles]
        manifest = build_manifest(entries)
    return manifest, strict or bool(manifest.strict)


def _parse_and_store(job_id: int, attempt: int, f: Any, path: Any, manifest: Any,
                     strict: bool) -> None:
    from reviewapp import storage
    from workers.traces.shards import parse_shard, part_to_bytes

    start = time.monotonic()
    blob = part_to_bytes(parse_shard(path, f.name, manifest=manifest, strict=strict))
    storage.save_bytes(part_name(job_id, attempt, f.pk), io.BytesIO(blob))
    log.info("parsed shard %s of job %s (attempt %s) in %.2f s", f.name, job_id, attempt,
             time.monotonic() - start)


def shard_run(*, job_id: int, attempt: int, file_id: int) -> str:
    """Body of the ``parse_shard`` task: claim, parse, store; ``"parsed"`` or why not."""
    from reviewapp import storage
    from reviewapp.models import AnalysisJob, TraceFile

    job = AnalysisJob.objects.filter(pk=job_id, state="running", attempts=attempt).first()
    if job is None:
        return "stale"  # the job finished, failed or moved to another attempt
    r = _redis()
    if r is None or not _claim(r, job_id, attempt, file_id):
        return "taken"
    files = list(TraceFile.objects.filter(bundle_id=job.bundle_id))
    f = next((x for x in files if x.pk == file_id), None)
    if f is None:
        return "gone"
    try:
        manifest, strict = _manifest(files, bool(job.bundle.strict))
        with storage.local_copy(f.storage_name) as path:
            _parse_and_store(job_id, attempt, f, path, manifest, strict)
        return "parsed"
    except Exception as exc:  # the coordinator parses it again and reports the error itself
        log.warning("shard %s of job %s: %s: %s", f.name, job_id, type(exc).__name__, exc)
        with contextlib.suppress(Exception):
            r.delete(_key(job_id, attempt, file_id))  # let the coordinator take it at once
        return "error"


def parse_in_shards(*, job: Any, attempt: int, files: Sequence[Any], paths: Sequence[Any],
                    send: Any) -> dict[str, Any]:
    """The coordinator's part: fan out, parse what nobody claimed, collect every part.

    ``paths`` are this worker's local copies of ``files`` (the coordinator has them anyway:
    ingest's detection needs every file); ``send(file_id)`` publishes one shard task.
    Returns ``{file name: ParsedPart}`` for ``ingest(parsed=...)``.
    """
    from reviewapp import storage
    from workers.traces.shards import parse_shard, part_from_bytes

    r = _redis()
    shard_files = shardable_files(files)
    local = {f.pk: p for f, p in zip(files, paths, strict=True)}
    manifest, strict = _manifest(files, bool(job.bundle.strict))
    for f in shard_files[1:]:  # the first one is the coordinator's own
        send(f.pk)
    parsed: dict[str, Any] = {}
    deadline = time.monotonic() + float(settings.BLKREVIEW_SHARD_LEASE_SECONDS)
    try:
        pending = list(shard_files)
        while pending:
            progress = False
            for f in list(pending):
                name = part_name(job.pk, attempt, f.pk)
                if _claim(r, job.pk, attempt, f.pk):
                    parsed[f.name] = parse_shard(local[f.pk], f.name, manifest=manifest,
                                                 strict=strict)
                    log.info("parsed shard %s of job %s (attempt %s) as coordinator", f.name,
                             job.pk, attempt)
                    pending.remove(f)
                    progress = True
                elif storage.default_storage.exists(name):
                    with storage.default_storage.open(name, "rb") as fh:
                        parsed[f.name] = part_from_bytes(fh.read())
                    pending.remove(f)
                    progress = True
                elif not r.exists(_key(job.pk, attempt, f.pk)):
                    continue  # lease ran out without a part: claim it on the next round
                elif time.monotonic() > deadline:
                    raise TimeoutError(f"shard {f.name} not parsed within the lease")
            if pending and not progress:
                time.sleep(0.2)
        return parsed
    finally:
        for f in shard_files:
            # a shard task delivered late must find its file taken (not claim and parse it
            # again, leaving a part nobody reads): the claim stays until its lease ends
            with contextlib.suppress(Exception):
                r.set(_key(job.pk, attempt, f.pk), "done", xx=False,
                      ex=int(settings.BLKREVIEW_SHARD_LEASE_SECONDS))
            storage.delete_quietly(part_name(job.pk, attempt, f.pk))
