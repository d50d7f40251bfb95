"""Load figures of issue 10: concurrent REST uploads, a 1 GB streamed upload, a 10M-event pair.

    .venv/bin/python benchmarks/bench_load.py                       # everything, PostgreSQL + Redis
    .venv/bin/python benchmarks/bench_load.py --only uploads --uploads 200
    .venv/bin/python benchmarks/bench_load.py --only rss --big-mb 1024
    .venv/bin/python benchmarks/bench_load.py --only pair --events 10000000
    .venv/bin/python benchmarks/bench_load.py --only pair --events 10000000 --embedded
    .venv/bin/python benchmarks/bench_load.py --smoke               # tiny sizes (seconds)

This process is the client (the "second process"): it starts the server side as subprocesses,
gunicorn (``reviewapp.wsgi``, ``--web-workers`` sync workers) and **one** Celery worker
(``--pool=solo``, the ``serve`` command's worker), on a scratch PostgreSQL database and Redis
queue (default) or on the embedded default (``--embedded``: SQLite and kombu's filesystem broker
in a scratch var/ directory). Everything goes over loopback HTTP with an API token, uploads are
streamed from disk (multipart written chunk by chunk, never whole in memory).

* ``uploads``: ``--uploads`` distinct small blkparse bundles POSTed at once from as many
  threads; printed: uploads/s over the upload phase, p50/p95/max answer time, then the check
  that none was lost or duplicated (one bundle, one job, one result per upload, every job
  succeeded) and the time until the last job finished.
* ``rss``: one ``--big-mb`` MB upload while the RSS of every gunicorn worker is sampled (from
  /proc) every 50 ms; printed: the largest growth of a worker over its RSS before the upload
  (target < 100 MB).
* ``pair``: a submission of two generated binary traces of ``--events`` events each
  (workers.traces.synth.realistic_table), timed from the first byte sent to the comparison step
  finished (target < 60 s with one worker).

Scratch resources (database, queue, media, var/, gunicorn, the worker) are removed at the end.
The machine's load average is printed first and last: the figures are only comparable with it.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
PG = os.environ.get("BENCH_PG", "postgres://postgres@127.0.0.1:5432")
REDIS = os.environ.get("BENCH_REDIS", "redis://127.0.0.1:6379/0")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def pct(values: list[float], q: float) -> float:
    v = sorted(values)
    return v[min(len(v) - 1, int(round(q / 100 * (len(v) - 1))))] if v else float("nan")


def loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


# --- the server side ---------------------------------------------------------------------------

class Stack:
    """gunicorn + one Celery worker on a scratch PostgreSQL/Redis or embedded default."""

    def __init__(self, *, embedded: bool, web_workers: int, tmp: Path) -> None:
        self.embedded = embedded
        self.tmp = tmp
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.db = f"blkreview_bench_load_{os.getpid()}"
        self.queue = f"bench-load-{os.getpid()}"
        env = {k: v for k, v in os.environ.items()
               if k not in ("DATABASE_URL", "CELERY_BROKER_URL", "REDIS_URL", "PYTEST_VERSION",
                            "BLKREVIEW_TESTING", "MEDIA_ROOT", "BLKREVIEW_CACHE_URL")}
        env.update({"DJANGO_SETTINGS_MODULE": "reviewapp.settings", "DEBUG": "0",
                    "LOG_LEVEL": "WARNING", "SECRET_KEY": "bench-load-" + "x" * 40,
                    "ALLOWED_HOSTS": "127.0.0.1,localhost", "PYTHONUNBUFFERED": "1",
                    "MEDIA_ROOT": str(tmp / "media"), "BLKREVIEW_VAR_DIR": str(tmp / "var"),
                    "PYTHONPATH": str(ROOT)})
        if embedded:
            env["BLKREVIEW_CACHE_URL"] = ""
        else:
            env.update({"DATABASE_URL": f"{PG}/{self.db}", "CELERY_BROKER_URL": REDIS,
                        "BLKREVIEW_ANALYSIS_QUEUE": self.queue,
                        "BLKREVIEW_REPLAY_QUEUE": self.queue + "-replay",
                        "BLKREVIEW_NOTIFY_QUEUE": self.queue + "-notify",
                        "BLKREVIEW_CACHE_PREFIX": f"bench-load-{os.getpid()}"})
            import psycopg

            with psycopg.connect(f"{PG}/postgres", autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{self.db}"')
                conn.execute(f'CREATE DATABASE "{self.db}"')
        self.env = env
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        manage = [sys.executable, "manage.py"]
        subprocess.run(manage + ["migrate", "--noinput", "-v0"], cwd=ROOT, env=env, check=True)
        out = subprocess.run(manage + ["shell", "-c", (
            "from django.contrib.auth import get_user_model;"
            "from reviewapp.services.tokens import token_create;"
            "u = get_user_model().objects.create_user('bench', 'b@example.org', 'bench-pw-1');"
            "print(token_create(user=u, name='bench')[1])")],
            cwd=ROOT, env=env, check=True, capture_output=True, text=True)
        self.token = out.stdout.strip().splitlines()[-1]
        self.web_log = open(tmp / "web.log", "wb")
        self.procs["web"] = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "reviewapp.wsgi:application", "--bind",
             f"127.0.0.1:{self.port}", "--workers", str(web_workers), "--timeout", "600",
             "--backlog", "2048"], cwd=ROOT, env=env, stdout=self.web_log,
            stderr=subprocess.STDOUT, start_new_session=True)
        from django.conf import settings  # noqa: F401  (not configured here: read the env)

        queues = self.queue + "," + self.queue + "-replay," + self.queue + "-notify,celery" \
            if not embedded else "analysis,replay,notify,celery"
        self.worker_log = open(tmp / "worker.log", "wb")
        self.procs["worker"] = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "workers.celery", "worker", "-Q", queues,
             "--pool=solo", "--concurrency=1", "--loglevel=WARNING", "--without-gossip",
             "--without-mingle", "-n", f"bench-{os.getpid()}@%h"],
            cwd=ROOT, env=env, stdout=self.worker_log, stderr=subprocess.STDOUT,
            start_new_session=True)
        deadline = time.time() + 120
        while time.time() < deadline:
            try:
                if request(self.base + "/api/v1/comparisons/", token=self.token)[0] == 200:
                    return
            except OSError:
                pass
            time.sleep(0.5)
        raise RuntimeError("gunicorn did not come up:\n" + (tmp / "web.log").read_text()[-2000:])

    def web_worker_pids(self) -> list[int]:
        master = self.procs["web"].pid
        out = []
        for p in Path("/proc").iterdir():
            if p.name.isdigit():
                try:
                    if int((p / "stat").read_text().split(") ")[1].split()[1]) == master:
                        out.append(int(p.name))
                except (OSError, IndexError, ValueError):
                    pass
        return out

    def sql(self, query: str) -> list[tuple[Any, ...]]:
        if self.embedded:
            import sqlite3

            with sqlite3.connect(self.tmp / "var" / "db.sqlite3", timeout=30) as conn:
                return list(conn.execute(query))
        import psycopg

        with psycopg.connect(f"{PG}/{self.db}") as conn:
            return list(conn.execute(query))

    def close(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in self.procs.values():
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
        if not self.embedded:
            import psycopg
            import redis

            with psycopg.connect(f"{PG}/postgres", autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{self.db}" WITH (FORCE)')
            r = redis.Redis.from_url(REDIS)
            for q in (self.queue, self.queue + "-replay", self.queue + "-notify"):
                r.delete(q, f"_kombu.binding.{q}")
            keys = list(r.scan_iter(f"bench-load-{os.getpid()}:*"))
            if keys:
                r.delete(*keys)


# --- the client side ---------------------------------------------------------------------------

def request(url: str, *, token: str, method: str = "GET") -> tuple[int, Any]:
    u = url.split("//", 1)[1]
    host, _, path = u.partition("/")
    conn = http.client.HTTPConnection(host, timeout=600)
    try:
        conn.request(method, "/" + path, headers={"Authorization": f"Token {token}"})
        r = conn.getresponse()
        body = r.read()
        return r.status, (json.loads(body) if body[:1] in (b"{", b"[") else body)
    finally:
        conn.close()


def post_multipart(base: str, path: str, token: str, fields: dict[str, str],
                   files: list[tuple[str, str, Path]]) -> tuple[int, Any, float]:
    """POST multipart/form-data streamed from disk (Content-Length computed beforehand)."""
    boundary = uuid.uuid4().hex
    head_parts = []
    for k, v in fields.items():
        head_parts.append(f"--{boundary}\r\nContent-Disposition: form-data; name=\"{k}\"\r\n\r\n"
                          f"{v}\r\n".encode())
    file_heads = [(f"--{boundary}\r\nContent-Disposition: form-data; name=\"{field}\"; "
                   f"filename=\"{name}\"\r\nContent-Type: application/octet-stream\r\n\r\n"
                   ).encode() for field, name, _ in files]
    tail = f"--{boundary}--\r\n".encode()
    length = (sum(map(len, head_parts)) + sum(map(len, file_heads)) + len(tail)
              + sum(p.stat().st_size + 2 for _, _, p in files))
    host = base.split("//", 1)[1]
    conn = http.client.HTTPConnection(host, timeout=900)
    t0 = time.perf_counter()
    try:
        conn.putrequest("POST", path)
        conn.putheader("Authorization", f"Token {token}")
        conn.putheader("Content-Type", f"multipart/form-data; boundary={boundary}")
        conn.putheader("Content-Length", str(length))
        conn.endheaders()
        for part in head_parts:
            conn.send(part)
        for fh, (_, _, p) in zip(file_heads, files):
            conn.send(fh)
            with open(p, "rb") as src:
                while chunk := src.read(1 << 20):
                    conn.send(chunk)
            conn.send(b"\r\n")
        conn.send(tail)
        r = conn.getresponse()
        body = r.read()
        dt = time.perf_counter() - t0
        try:
            return r.status, json.loads(body), dt
        except ValueError:
            return r.status, body[:300], dt
    finally:
        conn.close()


def blkparse_file(path: Path, i: int, lines: int = 200) -> None:
    out = []
    for k in range(lines):
        t = 1.0 + k * 1e-5
        out.append(f"  8,0    0 {k + 1:>8} {t:14.9f}   843  D   R {1_000_000 * i + 128 * k} + 128 "
                   f"[dd]")
    path.write_text("\n".join(out) + "\n")


def run_uploads(stack: Stack, n: int, tmp: Path) -> bool:
    files = []
    for i in range(n):
        p = tmp / f"up{i}.blkparse.txt"
        blkparse_file(p, i + 1)
        files.append(p)
    results: list[tuple[int, Any, float]] = [(0, None, 0.0)] * n
    barrier = threading.Barrier(n)

    def one(i: int) -> None:
        barrier.wait()
        try:
            results[i] = post_multipart(stack.base, "/api/v1/bundles/", stack.token,
                                        {"role": "baseline", "kernel": "bench-upload"},
                                        [("files", files[i].name, files[i])])
        except OSError as exc:
            results[i] = (0, str(exc), 0.0)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    ok = [r for r in results if r[0] == 201]
    times = [r[2] * 1000 for r in ok]
    print(f"uploads : {len(ok)}/{n} answered 201 in {wall:.1f} s = {len(ok) / wall:.1f} uploads/s;"
          f" answer time p50 {pct(times, 50):.0f} ms, p95 {pct(times, 95):.0f} ms, "
          f"max {max(times, default=0):.0f} ms")
    bad = [r for r in results if r[0] != 201]
    if bad:
        print(f"  {len(bad)} failed, first: {bad[0][0]} {bad[0][1]!r:.300}")
    ids = [r[1]["id"] for r in ok]
    t1 = time.perf_counter()
    deadline = time.time() + 3600
    while time.time() < deadline:
        (pending,), = stack.sql("SELECT count(*) FROM reviewapp_analysisjob WHERE state IN "
                                "('queued', 'running')")
        if pending == 0:
            break
        time.sleep(1)
    done = time.perf_counter() - t1
    mine = "(SELECT id FROM reviewapp_tracebundle WHERE kernel = 'bench-upload')"
    (bundles,), = stack.sql("SELECT count(*) FROM reviewapp_tracebundle WHERE kernel = "
                            "'bench-upload'")
    (jobs,), = stack.sql(f"SELECT count(*) FROM reviewapp_analysisjob WHERE bundle_id IN {mine}")
    (succeeded,), = stack.sql("SELECT count(*) FROM reviewapp_analysisjob WHERE state = "
                              f"'succeeded' AND bundle_id IN {mine}")
    (results_n,), = stack.sql("SELECT count(DISTINCT bundle_id) FROM reviewapp_bundleresult "
                              f"WHERE bundle_id IN {mine}")
    (per_bundle,), = stack.sql("SELECT coalesce(max(c), 0) FROM (SELECT count(*) AS c FROM "
                               f"reviewapp_analysisjob WHERE bundle_id IN {mine} GROUP BY "
                               "bundle_id) x")
    good = (len(ok) == n and len(set(ids)) == n and bundles == n and jobs == n
            and succeeded == n and results_n == n and per_bundle == 1)
    print(f"  every job finished {done:.1f} s after the last answer (one worker); bundles {bundles}"
          f", distinct ids {len(set(ids))}, jobs {jobs} (max {per_bundle} per bundle), succeeded "
          f"{succeeded}, results {results_n}: {'none lost or duplicated' if good else 'MISMATCH'}")
    return good


def rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def run_rss(stack: Stack, mb: int, tmp: Path) -> bool:
    from workers.traces.synth import realistic_table
    from workers.traces.writers import encode_blktrace

    big = tmp / "big.blktrace.0"
    head = encode_blktrace(realistic_table(200_000))
    with open(big, "wb") as fh:
        written = 0
        while written < mb * 2**20:
            fh.write(head)
            written += len(head)
    size = big.stat().st_size
    # warm every worker first (imports, numba's compiled detection code, connections): the
    # figure is what streaming the body costs, not a worker's first request
    warm = tmp / "warm.blktrace.0"
    warm.write_bytes(head)
    for _ in range(4 * len(stack.web_worker_pids())):
        post_multipart(stack.base, "/api/v1/bundles/", stack.token, {"role": "baseline"},
                       [("files", warm.name, warm)])
    pids = stack.web_worker_pids()
    before = {p: rss_kb(p) for p in pids}
    peak = dict(before)
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            for p in pids:
                try:
                    peak[p] = max(peak[p], rss_kb(p))
                except OSError:
                    pass
            time.sleep(0.05)

    th = threading.Thread(target=sample)
    th.start()
    status, body, dt = post_multipart(stack.base, "/api/v1/bundles/", stack.token,
                                      {"role": "baseline"}, [("files", big.name, big)])
    stop.set()
    th.join()
    growth = max((peak[p] - before[p]) / 1024 for p in pids)
    print(f"rss     : {size / 2**20:.0f} MB upload answered {status} in {dt:.1f} s "
          f"({size / 2**20 / dt:.0f} MB/s); web worker RSS before "
          f"{', '.join(f'{before[p] / 1024:.0f}' for p in pids)} MB, largest growth "
          f"{growth:.1f} MB (target < 100 MB)")
    if status != 201:
        print(f"  answer: {body!r:.300}")
    big.unlink()
    return status == 201 and growth < 100


def run_pair(stack: Stack, events: int, tmp: Path) -> bool:
    from workers.traces.synth import realistic_table
    from workers.traces.writers import encode_blktrace

    t0 = time.perf_counter()
    paths = []
    for side, seed in (("baseline", 1), ("patched", 2)):
        p = tmp / f"{side}.sda.blktrace.0"
        p.write_bytes(encode_blktrace(realistic_table(events, seed=seed)))
        paths.append(p)
    gen = time.perf_counter() - t0
    total = sum(p.stat().st_size for p in paths)
    print(f"pair    : generated 2 x {events:,} events ({total / 2**20:.0f} MB) in {gen:.0f} s")
    t0 = time.perf_counter()
    status, body, dt = post_multipart(
        stack.base, "/api/v1/submissions/", stack.token, {"title": "bench pair"},
        [("baseline_files", paths[0].name, paths[0]), ("patched_files", paths[1].name, paths[1])])
    if status != 201:
        print(f"  upload answered {status}: {body!r:.300}")
        return False
    cid = body["id"]
    state = "pending"
    while time.perf_counter() - t0 < 3600:
        code, check = request(f"{stack.base}/api/v1/comparisons/{cid}/check/", token=stack.token)
        state = check.get("state") if code == 200 and isinstance(check, dict) else "?"
        step = (check.get("step") or {}) if isinstance(check, dict) else {}
        if state not in ("pending", "?") and step.get("state") in ("succeeded", "failed", None):
            break
        time.sleep(0.5)
    total_s = time.perf_counter() - t0
    print(f"  upload {dt:.1f} s ({total / 2**20 / dt:.0f} MB/s), upload to results {total_s:.1f} s"
          f" (check state {state!r}; target < 60 s with one worker)")
    for p in paths:
        p.unlink()
    return state not in ("pending", "error", "?") and total_s < 60


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", choices=["uploads", "rss", "pair"], action="append")
    ap.add_argument("--uploads", type=int, default=200)
    ap.add_argument("--big-mb", type=int, default=1024)
    ap.add_argument("--events", type=int, default=10_000_000, help="events per side")
    ap.add_argument("--embedded", action="store_true", help="SQLite + filesystem broker")
    ap.add_argument("--web-workers", type=int, default=4)
    ap.add_argument("--smoke", action="store_true", help="tiny sizes")
    args = ap.parse_args(argv)
    if args.smoke:
        args.uploads, args.big_mb, args.events = 10, 16, 20_000
    what = args.only or ["uploads", "rss", "pair"]
    print(f"load average {loadavg()} on {os.cpu_count()} cores; "
          f"{'embedded default' if args.embedded else 'PostgreSQL + Redis'}, "
          f"{args.web_workers} gunicorn workers, one Celery worker (solo pool)")
    tmp = Path(tempfile.mkdtemp(prefix="bench-load-"))
    stack = None
    ok = True
    try:
        stack = Stack(embedded=args.embedded, web_workers=args.web_workers, tmp=tmp)
        if "pair" in what:
            ok &= run_pair(stack, args.events, tmp)
        if "uploads" in what:
            ok &= run_uploads(stack, args.uploads, tmp)
        if "rss" in what:
            ok &= run_rss(stack, args.big_mb, tmp)
    finally:
        if stack is not None:
            stack.close()
            if os.environ.get("BENCH_KEEP_LOGS"):
                for log in ("web.log", "worker.log"):
                    shutil.copy(tmp / log, Path(os.environ["BENCH_KEEP_LOGS"]) / log)
        shutil.rmtree(tmp, ignore_errors=True)
        print(f"load average {loadavg()} at the end")
    print("targets met" if ok else "a target was missed (see above)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
