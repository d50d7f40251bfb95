"""Upload to results of a big per-CPU binary blktrace with 1 and with 2 worker processes.

    .venv/bin/python benchmarks/bench_ingest_workers.py --events 4000000
    .venv/bin/python benchmarks/bench_ingest_workers.py --events 100000000 --cpus 8   # the issue's case

Generates ``--events`` events (workers.traces.synth.realistic_table: remap, Q, split, G/I/D/C
with plugs, on 2 disks) written as ``--cpus`` per-CPU binary files, then for each worker count
(``--workers 1,2``): a scratch PostgreSQL database, a SeaweedFS S3 server on loopback (the
tests' ``weed server -s3``), that many ``celery worker --pool=solo`` processes on their own
queue with BLKREVIEW_PARALLEL_INGEST_MB=0 (the bundle is parsed in shards), the bundle stored
through ``bundle_create`` (streamed to S3, as an upload is) and the clock stopped when the job
has succeeded. Printed per worker count: seconds end to end (upload + parse + merge + analyze
+ store), events/s, the speed-up over one worker, each worker's peak RSS (VmHWM; a solo
worker runs the task in its own process) and the load average (1, 5, 15 min) at the start and
the end of the run (the machine is shared: figures are only comparable at similar loads).
After the last worker count (unless ``--no-page``): a small patched run (``--page-events``) is
uploaded and analyzed, the comparison of the big run with it is created and its comparison
step timed (it reads the big EventTable in chunks), and the comparison's page and section JSON are
served by gunicorn and fetched by 4 clients for 10 s (p50/p95 per URL kind).
Everything scratch is removed at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

PG = "postgres://postgres@127.0.0.1:5432"
REDIS_DB_BASE = 6  # the runs use Redis databases 7 (1 worker), 8 (2 workers), ...


def write_trace(events: int, cpus: int, out: Path) -> list[Path]:
    """``--cpus`` per-CPU binary files of one ``realistic_table`` (in chunks of 4M events, so
    generating the 100M case does not hold it all at once)."""
    import numpy as np

    from workers.traces.synth import realistic_table
    from workers.traces.writers import encode_blktrace

    files = [out / f"sdx.blktrace.{c}" for c in range(cpus)]
    handles = [open(f, "wb") for f in files]  # noqa: SIM115
    try:
        done, seed, time_base = 0, 1, 0
        while done < events:
            n = min(4_000_000, events - done)
            table = realistic_table(n, seed=seed, cpus=cpus)
            # chunks follow each other in time; per-CPU sequence numbers keep increasing
            table.time_ns += time_base
            time_base = int(table.time_ns.max()) + 1000
            for c in range(cpus):
                rows = np.flatnonzero(table.cpu == c)
                if len(rows):
                    handles[c].write(encode_blktrace(table.take(rows), process_notes=seed == 1))
            done += n
            seed += 1
    finally:
        for h in handles:
            h.close()
    return files


def vm_hwm_mb(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


def compare_and_page(env: dict[str, str], bundle_id: int, patched: list[Path], tmp: Path
                     ) -> dict[str, object]:
    """The comparison of the analyzed bundle (baseline) with a small patched run (``patched``:
    uploaded and analyzed first; bench_compare_memory.py measures the step on two big runs),
    created by ``comparison_create`` as the upload
    form does and run by the bench workers; then its page: gunicorn on loopback, the page HTML
    and every section's JSON fetched by 4 clients for 10 s (bench_pages.hammer). Returns the
    comparison step's seconds (from creation to stored charts) and p50/p95 per URL kind."""
    from benchmarks.bench_pages import free_port, hammer, pct, serve

    code = (
        "import django, time; django.setup()\n"
        "from django.core.files import File\n"
        "from reviewapp.models import AnalysisJob, ComparisonResult, Patch, TraceBundle\n"
        "from reviewapp.services.bundles import bundle_create\n"
        "from reviewapp.services.comparisons import comparison_create\n"
        f"b = TraceBundle.objects.get(pk={bundle_id})\n"
        f"paths = {[str(f) for f in patched]!r}\n"
        "fhs = [open(p, 'rb') for p in paths]\n"
        "small, _ = bundle_create(files=[File(fh, name=p.rsplit('/', 1)[1]) "
        "for fh, p in zip(fhs, paths)], role='patched')\n"
        "job = AnalysisJob.objects.get(bundle=small)\n"
        "while job.state not in ('succeeded', 'failed'):\n"
        "    time.sleep(0.5); job.refresh_from_db()\n"
        "t0 = time.perf_counter()\n"
        "cmp = comparison_create(patch=Patch.objects.create(title='bench'), baseline=[b], "
        "patched=[small])\n"
        "while True:\n"
        "    r = ComparisonResult.objects.filter(comparison=cmp).first()\n"
        "    if r is not None and r.state in ('succeeded', 'failed'): break\n"
        "    time.sleep(0.5)\n"
        "from reviewapp.selectors import chart_index\n"
        "cmp.refresh_from_db()\n"
        "devs = chart_index(cmp).get('devices') or [{'dev': ''}]\n"
        "dev = devs[0]['dev']\n"
        "print({'comparison': cmp.pk, 'state': r.state, 'error': r.error, "
        "'compare_s': time.perf_counter() - t0, 'dev': dev})\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, check=True,
                         capture_output=True, text=True)
    res: dict[str, object] = eval(out.stdout.strip().splitlines()[-1])  # noqa: S307
    if res["state"] != "succeeded":
        return res
    port = free_port()
    web = {**env, "ALLOWED_HOSTS": "127.0.0.1,localhost", "DEBUG": "0", "LOG_LEVEL": "WARNING"}
    proc = serve(web, port, 2, 1, tmp / "gunicorn.log")
    try:
        import urllib.request

        base = f"http://127.0.0.1:{port}/comparisons/{res['comparison']}"
        urls = [("page", f"{base}/")]
        for sec in ("fragmentation", "seek", "throughput", "latency", "ordering", "model"):
            urls.append((sec, f"{base}/sections/{sec}.json?dev={res['dev']}"))
        t0 = time.perf_counter()
        urllib.request.urlopen(urls[0][1], timeout=60).read()
        res["first_page_ms"] = round((time.perf_counter() - t0) * 1000, 1)
        for _, u in urls[1:]:
            urllib.request.urlopen(u, timeout=60).read()
        lat = hammer(urls, 4, 10.0, 2000)
        res["latency_ms"] = {k: {"n": len(v), "p50": round(pct(v, 50), 1),
                                 "p95": round(pct(v, 95), 1)} for k, v in lat.items()}
    finally:
        import signal

        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
    return res


def run_once(files: list[Path], n_workers: int, events: int,
             page: list[Path] | None = None) -> dict[str, object]:
    from tests.seaweedfs import start as start_seaweedfs

    db = f"blkreview_bench_ingest_{os.getpid()}_{n_workers}"
    queue = f"bench-ingest-{os.getpid()}-{n_workers}"
    subprocess.run([sys.executable, "-c", (
        "import psycopg\n"
        f"c = psycopg.connect('{PG}/postgres', autocommit=True)\n"
        f"c.execute('DROP DATABASE IF EXISTS \"{db}\"'); c.execute('CREATE DATABASE \"{db}\"')")],
        check=True)
    # a Redis database of its own, emptied: the shard claims are keyed by job id and attempt,
    # and each run's scratch PostgreSQL database numbers its jobs from 1 again
    broker = f"redis://127.0.0.1:6379/{REDIS_DB_BASE + n_workers}"
    import redis

    redis.Redis.from_url(broker).flushdb()
    # 64 MB volumes: room for the trace, its shard parts and the stored table, twice over
    total = sum(f.stat().st_size for f in files)
    s3 = start_seaweedfs(max_volumes=max(50, int(total * 4 / (64 << 20)) + 20))
    tmp = Path(tempfile.mkdtemp(prefix="bench-ingest-"))
    env = {**os.environ, "DATABASE_URL": f"{PG}/{db}",
           "CELERY_BROKER_URL": broker, "SECRET_KEY": "bench-" + "x" * 40,
           "STORAGE_URL": s3.storage_url, "BLKREVIEW_ANALYSIS_QUEUE": queue,
           "BLKREVIEW_REPLAY_QUEUE": queue + "-replay",
           "BLKREVIEW_NOTIFY_QUEUE": queue + "-notify", "BLKREVIEW_PARALLEL_INGEST_MB": "0",
           "BLKREVIEW_TASK_TIME_LIMIT": "36000", "BLKREVIEW_MAX_UPLOAD_MB": "1000000",
           "BLKREVIEW_SHARD_LEASE_SECONDS": "7200", "DJANGO_SETTINGS_MODULE": "reviewapp.settings",
           "PYTHONPATH": str(ROOT), "LOG_LEVEL": "INFO", "MEDIA_ROOT": str(tmp / "media")}
    env.pop("PYTEST_VERSION", None)
    procs = []
    try:
        subprocess.run([sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"],
                       cwd=ROOT, env=env, check=True)
        for i in range(n_workers):
            log = open(tmp / f"w{i}.log", "wb")  # noqa: SIM115
            procs.append(subprocess.Popen(
                # the comparison step runs on the replay queue (docs/deploy.md, queues)
                [sys.executable, "-m", "celery", "-A", "workers.celery", "worker",
                 "-Q", f"{queue},{queue}-replay",
                 "--pool=solo", "--without-gossip", "--without-mingle", "--without-heartbeat",
                 "-n", f"bench{i}-{os.getpid()}@%h", "--loglevel=INFO"],
                cwd=tmp, env={**env, "TMPDIR": str(tmp)}, stdout=log, stderr=subprocess.STDOUT))
        deadline = time.time() + 120
        while not all(" ready." in (tmp / f"w{i}.log").read_text(errors="replace")
                      for i in range(n_workers)):
            if time.time() > deadline:
                raise RuntimeError("workers did not start")
            time.sleep(0.5)
        code = (
            "import django, time, sys; django.setup()\n"
            "from django.core.files import File\n"
            "from reviewapp.models import AnalysisJob\n"
            "from reviewapp.services.bundles import bundle_create\n"
            "t0 = time.perf_counter()\n"
            f"paths = {[str(f) for f in files]!r}\n"
            "fhs = [open(p, 'rb') for p in paths]\n"
            "b, _ = bundle_create(files=[File(fh, name=p.rsplit('/', 1)[1]) "
            "for fh, p in zip(fhs, paths)])\n"
            "t1 = time.perf_counter()\n"
            "job = AnalysisJob.objects.get(bundle=b)\n"
            "while True:\n"
            "    job.refresh_from_db()\n"
            "    if job.state in ('succeeded', 'failed'): break\n"
            "    time.sleep(0.5)\n"
            "t2 = time.perf_counter()\n"
            "print({'state': job.state, 'error': job.error, 'upload_s': t1 - t0, "
            "'total_s': t2 - t0, 'bundle': b.pk})\n")
        load = os.getloadavg()
        out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env,
                             capture_output=True, text=True)
        if out.returncode:  # say why (the upload's own traceback), not only that it failed
            raise RuntimeError(f"the upload step failed:\n{out.stderr[-4000:]}")
        res = eval(out.stdout.strip().splitlines()[-1])  # noqa: S307 - our own dict literal
        res["loadavg_start"] = [round(x, 2) for x in load]
        res["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
        res.update(workers=n_workers, events=events, events_per_s=events / res["total_s"],
                   peak_rss_mb={f"w{i}": round(vm_hwm_mb(p.pid)) for i, p in enumerate(procs)},
                   shards_parsed={f"w{i}": (tmp / f"w{i}.log").read_text(errors="replace")
                                  .count("parsed shard") for i in range(n_workers)})
        print(json.dumps(res), flush=True)  # before the page step: a failure there loses nothing
        if page and res["state"] == "succeeded":
            try:
                res["page"] = compare_and_page(env, int(res["bundle"]), page, tmp)
            except subprocess.CalledProcessError as exc:
                res["page"] = {"state": "bench error", "stderr": (exc.stderr or "")[-3000:]}
            res["page"]["peak_rss_mb_after"] = {f"w{i}": round(vm_hwm_mb(p.pid))
                                                for i, p in enumerate(procs)}
            print(json.dumps({"page": res["page"]}), flush=True)
        return res
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
        s3.stop()
        subprocess.run([sys.executable, "-c", (
            "import psycopg\n"
            f"c = psycopg.connect('{PG}/postgres', autocommit=True)\n"
            f"c.execute('DROP DATABASE IF EXISTS \"{db}\" WITH (FORCE)')")], check=False)
        import shutil

        shutil.rmtree(tmp, ignore_errors=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--events", type=int, default=4_000_000)
    ap.add_argument("--cpus", type=int, default=4)
    ap.add_argument("--workers", default="1,2")
    ap.add_argument("--no-page", action="store_true",
                    help="skip the comparison and its page after the last worker count")
    ap.add_argument("--page-events", type=int, default=1_000_000,
                    help="events of the small patched run the big one is compared with")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-ingest-trace-") as d:
        t0 = time.perf_counter()
        files = write_trace(args.events, args.cpus, Path(d))
        size = sum(f.stat().st_size for f in files)
        print(f"trace: {args.events} events, {args.cpus} per-CPU files, {size / 1e6:.0f} MB "
              f"(generated in {time.perf_counter() - t0:.0f} s)", flush=True)
        results = []
        small: list[Path] | None = None
        if not args.no_page:
            (Path(d) / "patched").mkdir()
            small = write_trace(args.page_events, args.cpus, Path(d) / "patched")
        counts = [int(x) for x in args.workers.split(",")]
        for i, n in enumerate(counts):
            r = run_once(files, n, args.events, page=small if i == len(counts) - 1 else None)
            results.append(r)
    base = results[0]["total_s"]
    for r in results:
        print(f"{r['workers']} worker(s): {r['state']}, {r['total_s']:.1f} s end to end "
              f"(upload {r['upload_s']:.1f} s), {r['events_per_s'] / 1e3:.0f}k events/s, "
              f"speed-up {base / r['total_s']:.2f}x, peak RSS {r['peak_rss_mb']} MB, "
              f"shards {r['shards_parsed']}, load average {r['loadavg_start']} -> "
              f"{r['loadavg_end']}")
        if r.get("page"):
            print(f"  comparison with a {args.page_events}-event patched run, its step and its "
                  f"page: {r['page']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
