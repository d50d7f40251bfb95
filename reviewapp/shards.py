"""Parallel ingest of a huge bundle: a Celery chord of shard tasks, one per trace file or per
byte range of a large binary trace.

A binary blktrace file larger than ``BLKREVIEW_SHARD_RANGE_MB`` is parsed as byte ranges of
about that size, cut at record boundaries (:mod:`workers.traces.byterange`): a shard task
fetches only its range (one ranged GET) and holds only its rows, and the callback chains the
ranges' parts into the file's part (:class:`workers.traces.byterange.RangedPartFile`), exactly
the whole-file parse; ranges that do not add up (a payload that looks like a chain of
records over a boundary, too much damage) are refused and the callback parses that file whole.
Other files (text traces, small binary files) are one shard each.

When a bundle is larger than ``BLKREVIEW_PARALLEL_INGEST_MB`` and makes at least two shards
(per-CPU blktrace files, several captures, one large file in ranges), and the broker is Redis
(so its Redis is the chord's result backend, settings.CELERY_RESULT_BACKEND), the analysis
task only fans out:

1. it reads the head of every binary trace (:func:`workers.traces.shards.first_event_time`)
   for the bundle's genesis, the anchor of the throughput bins, and sends
   ``chord(group(parse_shard(job, attempt, file, anchor) ...), merge_shards(job, attempt))``
   (reviewapp/tasks.py); the attempt is then held by a lease (the job's heartbeat set
   ``BLKREVIEW_SHARD_LEASE_SECONDS`` ahead, :func:`reviewapp.services.jobs.job_lease`) and the
   task returns, so no worker sits waiting for the others;
2. each shard task claims its file (Redis ``SET NX`` with the lease), parses it
   (:func:`workers.traces.shards.parse_shard`), computes its partial results
   (:func:`workers.analyzers.partial.partials_of`: action counts, sizes, throughput bins), stores
   both under ``shards/job-<id>-a<attempt>/`` and reports ``parsed 3/8 files, 41,234,567
   events`` on the job; while it runs it renews the attempt's lease;
3. the chord's callback claims the merge, streams every part to a local file, merges them a
   chunk at a time into a column store on local disk (:func:`merge`:
   :func:`workers.traces.streammerge.ingest_stored`, exactly the single-task merge: one comm
   map and genesis across per-CPU files, time order, manifest; ``ingest(parsed=...)`` in
   memory for the bundles it does not cover), merges the partials into the analyzers
   (``analyze(partials=...)``) and stores the results as the single-task path does; the parts
   are deleted after the merge.

Exactly once. Every task names the job and the attempt, and does nothing (``"stale"``) when
that attempt is no longer the job's running one; a file is parsed by whoever claims it first
and a redelivered shard finds it taken or its part stored. The lease coordinator of the first
version stays as the chord's fallback, inside the callback: a file without a part when the
callback runs (its shard task failed, or the chord fired early after a duplicate delivery) is
claimed and parsed by the callback itself, or waited for while another claimer holds it. A
file that does not parse fails the job with the single-task path's error, because the callback
parses it again through ``ingest`` (which stops on the first bad file in the bundle's order).
A chord that is lost (a shard task's message gone, its worker dead for good, the callback's
worker killed) stops renewing the lease; the sweeper then queues the job again as a new
attempt, whose fan-out deletes the parts of the earlier ones.

Without Redis (the embedded default's filesystem broker) bundles are always ingested in one
task.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import socket
import time
from collections.abc import Callable, Sequence
from pathlib import Path
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


def chord_available() -> bool:
    """A chord needs a result backend: the broker's Redis (settings.CELERY_RESULT_BACKEND)."""
    backend = str(getattr(settings, "CELERY_RESULT_BACKEND", None) or "")
    return backend.startswith(("redis://", "rediss://")) and _redis() is not None


def shardable_files(files: Sequence[Any]) -> list[Any]:
    """The files a shard may parse: non-empty top-level traces (not archives or manifests)."""
    return [f for f in files if f.size > 0 and (f.format or "") not in TRACE_FORMATS_SKIP]


def range_count(f: Any) -> int:
    """How many byte ranges file ``f`` is parsed as (1: whole): binary blktrace over
    ``BLKREVIEW_SHARD_RANGE_MB`` only."""
    from workers.traces.byterange import range_count as count

    mb = float(settings.BLKREVIEW_SHARD_RANGE_MB)
    if (f.format or "") != "blktrace" or mb <= 0:
        return 1
    return count(int(f.size), int(mb * 1024 * 1024))


def shard_units(files: Sequence[Any]) -> list[tuple[Any, int, int]]:
    """The chord's shards: ``(file, range index, range count)``, a count of 1 for a file
    parsed whole."""
    return [(f, i, n) for f in shardable_files(files) for n in (range_count(f),)
            for i in range(n)]


def unit_key(file_id: int, index: int = 0, count: int = 1) -> str:
    """A shard's name in claims and part names: the file's id, with its range when cut."""
    return str(file_id) if count == 1 else f"{file_id}.{index}of{count}"


def _unit_word(units: Sequence[tuple[Any, int, int]]) -> str:
    return "files" if all(n == 1 for _, _, n in units) else "file parts"


def wanted(files: Sequence[Any]) -> bool:
    """Whether this bundle is ingested in parallel (size threshold, >= 2 shards, Redis)."""
    limit = float(settings.BLKREVIEW_PARALLEL_INGEST_MB) * 1024 * 1024
    if limit < 0 or sum(f.size for f in files) <= limit:
        return False
    return len(shard_units(files)) >= 2 and chord_available()


def part_name(job_id: int, attempt: int, file_id: int | str) -> str:
    return f"shards/job-{job_id}-a{attempt}/{file_id}.part"


def partial_name(job_id: int, attempt: int, file_id: int | str) -> str:
    return f"shards/job-{job_id}-a{attempt}/{file_id}.partial"


def lease_seconds() -> int:
    return int(settings.BLKREVIEW_SHARD_LEASE_SECONDS)


def _ns(job: Any) -> str:
    """The Redis name of one attempt of one job: id, attempt and the attempt's task id, so two
    databases on one Redis (test runs, a reset development database) never share a claim."""
    token = job.celery_task_id or str(job.created.timestamp())
    return f"{job.pk}:{job.attempts}:{token}"


def _key(job: Any, file_id: int | str) -> str:
    return f"blkreview:shard:{_ns(job)}:{file_id}"


def _progress_key(job: Any) -> str:
    return f"blkreview:shardprog:{_ns(job)}"


def _claim(r: Any, job: Any, file_id: int | str) -> bool:
    me = f"{socket.gethostname()}:{os.getpid()}"
    return bool(r.set(_key(job, file_id), me, nx=True, ex=lease_seconds()))


def _current(job_id: int, attempt: int) -> Any:
    from reviewapp.models import AnalysisJob

    return AnalysisJob.objects.filter(pk=job_id, state="running", attempts=attempt).first()


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


def bundle_anchor(files: Sequence[Any]) -> int | None:
    """The bundle's genesis as the heads of its binary traces give it (absolute ns), or None.

    Only the first :data:`~workers.traces.shards.PEEK_BYTES` of each file are read from
    storage. The merge checks the anchor against the true genesis (see
    :func:`workers.traces.shards.first_event_time`)."""
    from reviewapp import storage
    from workers.traces.shards import PEEK_BYTES, first_event_time

    times = []
    for f in shardable_files(files):
        if (f.format or "") != "blktrace":
            continue
        try:
            head = storage.read_head(f.storage_name, PEEK_BYTES)
        except OSError:
            continue
        t = first_event_time(head, name=f.name)
        if t is not None:
            times.append(t)
    return min(times) if times else None


def _unit_names(job_id: int, attempt: int, files: Sequence[Any]) -> list[str]:
    """Every part and partial name an attempt may have written (whole files and ranges)."""
    out = []
    for f in shardable_files(files):
        keys = {unit_key(f.pk)} | {unit_key(f.pk, i, n) for _, i, n in shard_units([f])}
        for k in sorted(keys):
            out += [part_name(job_id, attempt, k), partial_name(job_id, attempt, k)]
    return out


def fan_out(*, job: Any, attempt: int, files: Sequence[Any],
            send: Callable[[list[tuple[int, int, int]], int | None], None]) -> int:
    """The analysis task's part: clean earlier attempts, count, anchor, send the chord.

    ``send(units, anchor)`` publishes the chord (reviewapp/tasks.py), one ``(file id, range
    index, range count)`` per shard. Returns the number of shards."""
    from reviewapp import storage

    units = shard_units(files)
    for earlier in range(1, attempt):  # a lost attempt's parts (its chord never merged)
        for name in _unit_names(job.pk, earlier, files):
            storage.delete_quietly(name)
    r = _redis()
    key = _progress_key(job)
    r.delete(key)
    r.hset(key, mapping={"total": len(units), "files": 0, "events": 0,
                         "unit": _unit_word(units)})
    r.expire(key, int(settings.CELERY_RESULT_EXPIRES))
    anchor = bundle_anchor(files)
    send([(f.pk, i, n) for f, i, n in units], anchor)
    log.info("job %s (attempt %s): %d shards sent as a chord (anchor %s)", job.pk, attempt,
             len(units), anchor)
    return len(units)


def _report(job: Any, events: int) -> None:
    """One more file parsed: the job's progress message from the attempt's counters."""
    from reviewapp.services import jobs

    try:
        r = _redis()
        key = _progress_key(job)
        pipe = r.pipeline()
        pipe.hincrby(key, "files", 1)
        pipe.hincrby(key, "events", int(events))
        pipe.hget(key, "total")
        pipe.hget(key, "unit")
        files, total_events, total, unit = pipe.execute()
        jobs.job_shard_progress(job_id=job.pk, attempt=job.attempts, files=int(files),
                                total=int(total or 0), events=int(total_events),
                                seconds=lease_seconds(),
                                unit=(unit or b"files").decode() if isinstance(unit, bytes)
                                else str(unit or "files"))
    except Exception:  # progress is a courtesy: never fail a shard over it
        log.warning("job %s: shard progress not reported", job.pk, exc_info=True)


def _store(job_id: int, attempt: int, file_id: int | str, part: Any, partials: Any) -> None:
    """The part goes to storage from a local file (:func:`workers.traces.shards.write_part`):
    its .npz is never a bytes copy in memory beside the parsed table."""
    import tempfile

    from reviewapp import storage
    from workers.traces.shards import write_part

    storage.save_bytes(partial_name(job_id, attempt, file_id), io.BytesIO(partials.to_bytes()))
    with tempfile.NamedTemporaryFile(prefix="blkreview-part-", suffix=".part") as fh:
        write_part(part, fh)
        fh.flush()
        fh.seek(0)
        storage.save_bytes(part_name(job_id, attempt, file_id), fh)


def _parse(f: Any, path: Any, manifest: Any, strict: bool, anchor: int | None) -> tuple[Any, Any]:
    """``(part, partials)`` of one file: what a shard computes (anchor None for text parts,
    whose times are not the binary genesis' base)."""
    from workers.traces.shards import parse_shard

    return _with_partials(parse_shard(path, f.name, manifest=manifest, strict=strict), anchor)


def _with_partials(part: Any, anchor: int | None) -> tuple[Any, Any]:
    from workers.analyzers.partial import partials_of
    from workers.events import EventTable

    table = part.table if part.table is not None else EventTable.empty()
    return part, partials_of(table, anchor_ns=anchor if part.binary else None)


def _parse_range(f: Any, index: int, count: int, strict: bool,
                 anchor: int | None) -> tuple[Any, Any]:
    """``(part, partials)`` of one byte range of a binary file: only the range (and what its
    boundaries need past it) is fetched from storage, a ranged read each. The parser is told
    the stored file's name as the whole-file path's local copy has it (the per-CPU file name
    check of blktrace_bin.file_notes)."""
    from reviewapp import storage
    from workers.traces.byterange import parse_range_fetched

    def fetch(offset: int, length: int, fh: Any) -> None:
        for chunk in storage.iter_range(f.storage_name, offset, length):
            fh.write(chunk)

    part = parse_range_fetched(fetch, size=int(f.size), head=storage.read_head(f.storage_name, 4),
                               index=index, count=count, name=f.name,
                               basename=Path(f.storage_name).name, strict=strict)
    return _with_partials(part, anchor)


def partials_key(name: str, index: int = 0, count: int = 1) -> str:
    """A shard's partials in the callback's dict: the file's name, with its range when cut."""
    return name if count == 1 else f"{name}\x00{index}"


def _test_pause() -> None:
    """Test only: BLKREVIEW_TEST_STAGE_DELAY seconds after a shard claimed its file, so a test
    can kill its worker while it holds the claim (0 in every real deployment)."""
    delay = float(getattr(settings, "BLKREVIEW_TEST_STAGE_DELAY", 0) or 0)
    if delay > 0:
        time.sleep(delay)


def shard_run(*, job_id: int, attempt: int, file_id: int, anchor: int | None = None,
              index: int = 0, count: int = 1) -> dict[str, Any]:
    """Body of the ``parse_shard`` task: claim, parse, store; ``{"state": "parsed", ...}`` or
    why not (``stale``, ``taken``, ``done``, ``gone``, ``error``). Never raises: the chord's
    callback must run and report the job's outcome. ``count`` > 1: byte range ``index`` of
    the file."""
    from reviewapp import storage
    from reviewapp.models import TraceFile

    out: dict[str, Any] = {"file_id": file_id, "host": socket.gethostname(), "pid": os.getpid()}
    if count > 1:
        out["range"] = [index, count]
    unit = unit_key(file_id, index, count)
    job = _current(job_id, attempt)
    if job is None:
        return {**out, "state": "stale"}  # the job finished, failed or moved to another attempt
    r = _redis()
    if r is None or not _claim(r, job, unit):
        return {**out, "state": "taken"}
    if storage.default_storage.exists(part_name(job_id, attempt, unit)):
        return {**out, "state": "done"}  # parsed already; the claim had expired
    files = list(TraceFile.objects.filter(bundle_id=job.bundle_id))
    f = next((x for x in files if x.pk == file_id), None)
    if f is None:
        return {**out, "state": "gone"}
    _test_pause()
    try:
        start = time.monotonic()
        manifest, strict = _manifest(files, bool(job.bundle.strict))
        if count > 1:
            part, partials = _parse_range(f, index, count, strict, anchor)
        else:
            with storage.local_copy(f.storage_name) as path:
                part, partials = _parse(f, path, manifest, strict, anchor)
        if _current(job_id, attempt) is None:
            return {**out, "state": "stale"}  # superseded while parsing: write nothing
        _store(job_id, attempt, unit, part, partials)
        log.info("parsed shard %s of job %s (attempt %s) in %.2f s", f.name, job_id, attempt,
                 time.monotonic() - start)
        _report(job, part.events)
        return {**out, "state": "parsed", "events": int(part.events)}
    except Exception as exc:  # the callback parses it again and reports the error itself
        log.warning("shard %s of job %s: %s: %s", f.name, job_id, type(exc).__name__, exc)
        with contextlib.suppress(Exception):
            r.delete(_key(job, unit))  # let the callback take it at once
        return {**out, "state": "error", "error": f"{type(exc).__name__}: {exc}"[:500]}


def claim_merge(job: Any) -> bool:
    """The chord's callback runs once per attempt (a duplicate delivery finds it taken)."""
    r = _redis()
    return r is not None and _claim(r, job, "merge")


def collect(*, job: Any, attempt: int, files: Sequence[Any], local: Callable[[Any], Path],
            workdir: Path, stack: contextlib.ExitStack, anchor: int | None = None
            ) -> tuple[dict[str, Any], dict[str, Any]]:
    """The callback's part: every shard's part file and partials, by file name.

    Parts are :class:`workers.traces.shards.PartFile` on this host's disk, read in chunks by
    the merge: a part in storage is streamed to a local file (``storage.local_copy``, held
    open by ``stack``); a shard nobody holds is claimed and parsed here (its shard task failed
    or has not run) and its part written under ``workdir``; a shard another worker holds is
    waited for until its lease ends. ``local(file)`` gives this worker's local copy of a
    bundle file (made on demand: only a file parsed whole here is downloaded; a range parsed
    here is fetched as its shard task would). The ranges of a file cut in byte ranges are
    chained into one :class:`workers.traces.byterange.RangedPartFile`; when they do not add up
    to the whole file (or one of them did not parse) the file is parsed whole here. Claims
    stay until their lease ends, so a shard task delivered late does nothing. The parts are
    deleted from storage by :func:`cleanup`. Partials are keyed by :func:`partials_key`.
    """
    from reviewapp import storage
    from workers.analyzers.partial import Partials
    from workers.traces.shards import PartFile, write_part

    r = _redis()
    manifest: Any = None
    strict = False
    have_manifest = False
    parts: dict[tuple[int, int], Any] = {}
    partials: dict[str, Any] = {}
    deadline = time.monotonic() + float(lease_seconds())
    pending = shard_units(files)

    def bundle_manifest() -> tuple[Any, bool]:
        nonlocal manifest, strict, have_manifest
        if not have_manifest:
            manifest, strict = _manifest(files, bool(job.bundle.strict))
            have_manifest = True
        return manifest, strict

    def parse_here(f: Any, index: int, count: int) -> None:
        m, st = bundle_manifest()
        try:
            if count > 1:
                part, got = _parse_range(f, index, count, st, anchor)
            else:
                part, got = _parse(f, local(f), m, st, anchor)
            out = workdir / f"{unit_key(f.pk, index, count)}.part"
            with open(out, "wb") as fh:
                write_part(part, fh)
            del part
            parts[(f.pk, index)] = PartFile(out)
            partials[partials_key(f.name, index, count)] = got
            log.info("parsed shard %s of job %s (attempt %s) in the callback", f.name,
                     job.pk, attempt)
        except Exception:
            pass  # left to ingest, which raises the single-task path's error

    while pending:
        progress = False
        for unit in list(pending):
            f, index, count = unit
            key = unit_key(f.pk, index, count)
            name = part_name(job.pk, attempt, key)
            if storage.default_storage.exists(name):
                parts[(f.pk, index)] = PartFile(stack.enter_context(storage.local_copy(name)))
                with contextlib.suppress(OSError, ValueError, KeyError):
                    with storage.default_storage.open(partial_name(job.pk, attempt, key),
                                                      "rb") as fh:
                        partials[partials_key(f.name, index, count)] = Partials.from_bytes(
                            fh.read())
            elif _claim(r, job, key):
                parse_here(f, index, count)
            elif not r.exists(_key(job, key)):
                continue  # lease ran out without a part: claim it on the next round
            elif time.monotonic() > deadline:
                raise TimeoutError(f"shard {key} ({f.name}) not parsed within the lease")
            else:
                continue
            pending.remove(unit)
            progress = True
        if pending and not progress:
            time.sleep(0.2)
    return _assemble(files, parts, partials, parse_here), partials


def _assemble(files: Sequence[Any], parts: dict[tuple[int, int], Any],
              partials: dict[str, Any], parse_here: Callable[[Any, int, int], None]
              ) -> dict[str, Any]:
    """Parts by file name: a whole file's own, a cut file's ranges chained (or, when they do
    not add up, the file parsed whole by ``parse_here``, its ranges' partials dropped)."""
    from workers.traces.byterange import NotCombinable, RangedPartFile

    out: dict[str, Any] = {}
    for f in shardable_files(files):
        count = range_count(f)
        if count == 1:
            if (f.pk, 0) in parts:
                out[f.name] = parts[(f.pk, 0)]
            continue
        ranges = [parts.get((f.pk, i)) for i in range(count)]
        try:
            if any(p is None for p in ranges):
                raise NotCombinable("a range did not parse")
            out[f.name] = RangedPartFile(ranges)
            continue
        except NotCombinable as exc:
            log.warning("%s: its %d byte ranges are not the whole file (%s): parsed whole",
                        f.name, count, exc)
        for i in range(count):
            partials.pop(partials_key(f.name, i, count), None)
            parts.pop((f.pk, i), None)
        parse_here(f, 0, 1)
        if (f.pk, 0) in parts:
            out[f.name] = parts[(f.pk, 0)]
    return out


def merge(*, files: Sequence[Any], local: Callable[[Any], Path], strict: bool,
          parts: dict[str, Any], workdir: Path) -> Any:
    """The merged bundle: a :class:`workers.traces.streammerge.StoredIngest` (the table in a
    column store under ``workdir``, merged a chunk at a time) when the bundle is per-file
    binary traces in time order, else ``ingest(parsed=...)``'s :class:`Ingest` in memory with
    the parts loaded whole (text traces, archives, a file out of time order, a file without a
    part: rare in a bundle big enough to shard). Either is the single-task result.

    The chunked merge reads each file's size from its record and its format from the head of
    the stored file (one ranged read; ``detect_format`` reads no more): the traces themselves
    are not downloaded again, only manifest files are (``local``); the in-memory fallback
    downloads everything, as ``ingest`` needs the files."""
    from reviewapp import storage
    from workers.traces import ingest
    from workers.traces.detect import SNIFF_BYTES, detect_bytes
    from workers.traces.streammerge import InputFile, NotMergeable, ingest_stored_inputs

    inputs = []
    for f in files:
        size = int(f.size)
        fmt = detect_bytes(storage.read_head(f.storage_name, SNIFF_BYTES), f.name) if size \
            else "empty"
        inputs.append(InputFile(f.name, size, fmt, lambda f=f: local(f)))
    try:
        stored = ingest_stored_inputs(inputs, strict=strict, parts=parts,
                                      out=workdir / "table")
    except NotMergeable as exc:
        log.warning("chunked merge not possible (%s): merging in memory", exc)
        stored = None
    if stored is not None:
        return stored
    return ingest([local(f) for f in files], names=[f.name for f in files], strict=strict,
                  parsed={k: p.load() for k, p in parts.items()})


def cleanup(*, job: Any, files: Sequence[Any]) -> None:
    """After the merge: hold every claim until its lease ends, delete the parts."""
    from reviewapp import storage

    r = _redis()
    for f, index, count in shard_units(files):
        # a shard task delivered late must find its shard taken (not claim and parse it
        # again, leaving a part nobody reads): the claim stays until its lease ends
        with contextlib.suppress(Exception):
            r.set(_key(job, unit_key(f.pk, index, count)), "done", ex=lease_seconds())
    for name in _unit_names(job.pk, job.attempts, files):
        storage.delete_quietly(name)
    with contextlib.suppress(Exception):
        r.delete(_progress_key(job))


def merged_partials(ing: Any, partials: dict[str, Any]) -> Any:
    """The shards' partials merged in the merged table's time base, or None.

    Binary blktrace parts were binned on their raw times; the merge made those relative to the
    bundle's genesis, so their grids move by ``-genesis`` (text parts keep their times and
    carry no grid). Files the merge skipped (a blkparse text copy of a binary trace in the
    bundle) are left out; anything else that does not add up is refused by ``analyze``'s row
    checks, which then compute from the table. ``ing`` is an ``Ingest`` or a ``StoredIngest``
    (whose table is in time order: its first time is its earliest)."""
    from workers.analyzers.partial import merge_partials

    if not partials:
        return None
    skipped = {r.name for r in getattr(ing, "files", []) if getattr(r, "error", None)}
    store = getattr(ing, "store", None)
    meta = (store.meta if store is not None else ing.table.meta) or {}
    genesis = int(meta.get("genesis_ns") or 0)
    chosen = []
    for name, p in partials.items():
        if name.split("\x00", 1)[0] in skipped:  # a range's partials: partials_key
            continue
        binary = p.grid is not None
        chosen.append(p.shifted(-genesis) if binary else p)
    merged = merge_partials(chosen)
    if store is not None:
        rows = len(store)
        t_min = int(store.column("time_ns", 0, 1)[0]) if rows else None
    else:
        t = ing.table.time_ns
        rows = len(t)
        t_min = int(t.min()) if rows else None
    fits = merged.grid is not None and rows > 0 and merged.grid.anchor_ns == t_min
    log.info("partials of %d files merged (%d events of %d); throughput bins from the shards: "
             "%s", len(chosen), merged.events, rows, "yes" if fits else "no")
    return merged
