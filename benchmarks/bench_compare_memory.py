"""Peak memory and time of the comparison step on two huge stored runs, in its own process.

    .venv/bin/python benchmarks/bench_compare_memory.py --events 4000000
    .venv/bin/python benchmarks/bench_compare_memory.py --events 100000000 --dir DIR  # the issue's case

Writes one stored table of ``--events`` events (``workers.traces.synth.realistic_table`` in
4M-event pieces appended to a column store, analyzed by ``analyze_chunks`` as the chunked ingest
does, saved by ``ColumnStore.save_npz``: the .npz an ingest stores, built without holding the
table), then in a scratch PostgreSQL database makes a comparison of two bundles whose stored
results and EventTable are that table (baseline and patched: **``--events`` events per side**,
the same events on both), and runs the comparison step (``reviewapp.tasks.run_compare``: the
seek of every stage of both runs, the model panel with both fidelities, ``compare``, the
check, the chart payloads and the report, stored) in a fresh Python process, as a solo
worker's task runs. Storage is a local ``MEDIA_ROOT`` (an S3 store is first streamed to a local
file by ``storage.local_copy``; the step then reads the same file). Printed as JSON: the step's
seconds, the process's peak RSS (VmHWM) before the step (Django and the rows) and after it,
what the model panel replayed and the load average.

``--dir`` keeps the table and its results there and reuses them on the next run (the 100M
table took 112 s to write, analyze and save at load 5; 462 MB on disk). ``--tree`` runs the step
with the code of another checkout (e.g. an export of an older commit: its ``reviewapp`` and
``workers``), to measure before and after on the same table.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

PG = "postgres://postgres@127.0.0.1:5432"

WRITE = """
import json, shutil, sys, time
from pathlib import Path
from workers.analyzers.stream import analyze_chunks
from workers.events import COLUMNS
from workers.traces.columnstore import ColumnStoreWriter
from workers.traces.synth import realistic_table
events, out = int(sys.argv[1]), Path(sys.argv[2])
t0 = time.perf_counter()
w = ColumnStoreWriter(out / "store", events)
done, seed, base, head = 0, 1, 0, None
while done < events:
    n = min(4_000_000, events - done)
    t = realistic_table(n, seed=seed)
    t.time_ns += base  # the pieces follow each other in time
    base = int(t.time_ns[-1]) + 1000
    w.append({c: getattr(t, c) for c, _ in COLUMNS})
    head = head or t
    done += n
    seed += 1
store = w.close(comms=head.comms, devices=head.devices, time_known=True, meta={})
t1 = time.perf_counter()
results = analyze_chunks(lambda: store.chunks())
(out / "results.json").write_text(json.dumps(results, default=str))
t2 = time.perf_counter()
store.save_npz(out / "events.npz")
shutil.rmtree(out / "store")
print(json.dumps({"stage": "table", "events": events, "write_s": round(t1 - t0, 1),
                  "analyze_s": round(t2 - t1, 1), "save_s": round(time.perf_counter() - t2, 1),
                  "npz_mb": round((out / "events.npz").stat().st_size / 1e6)}))
"""

STEP = """
import django, json, sys, time
django.setup()
from pathlib import Path
from django.core.files.storage import default_storage
from reviewapp.models import (BundleResult, Comparison, ComparisonResult, Patch,
                              TraceBundle)

def hwm():
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) // 1024

name, results = sys.argv[1], json.loads(Path(sys.argv[2]).read_text())
kernels = {"baseline": "6.1.0-57-amd64", "patched": "6.18.0"}
bundles = {}
for side in ("baseline", "patched"):
    b = TraceBundle.objects.create(role=side, kernel=kernels[side], checksum=side,
                                   parse_status="parsed")
    BundleResult.objects.create(bundle=b, data=results, events_name=name)
    bundles[side] = b
cmp = Comparison.objects.create(patch=Patch.objects.create(title="bench"),
                                policy="split_remainder=head")
cmp.baseline_bundles.add(bundles["baseline"])
cmp.patched_bundles.add(bundles["patched"])
r = ComparisonResult.objects.create(comparison=cmp)
before = hwm()
from reviewapp.tasks import run_compare
t0 = time.perf_counter()
state = run_compare(r.pk)
secs = time.perf_counter() - t0
r.refresh_from_db()
m = r.model or {}
print(json.dumps({"state": state, "error": r.error, "compare_s": round(secs, 1),
                  "peak_rss_mb_before": before, "peak_rss_mb": hwm(),
                  "model_state": m.get("state"), "model_error": m.get("error"),
                  "bios": m.get("bios"), "window": (m.get("window") or {}).get("note"),
                  "patched_window": (m.get("patched_window") or {}).get("note")}))
"""


def run(code: str, args: list[str], env: dict[str, str], cwd: Path = ROOT) -> dict[str, object]:
    out = subprocess.run([sys.executable, "-c", code, *args], cwd=cwd, env=env,
                         capture_output=True, text=True)
    if out.returncode:
        raise RuntimeError(out.stderr[-4000:])
    res: dict[str, object] = json.loads(out.stdout.strip().splitlines()[-1])
    return res


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--events", type=int, default=4_000_000)
    ap.add_argument("--dir", help="keep the table and its results here (reused when present)")
    ap.add_argument("--tree", help="run the step with this checkout's code (default: this one)")
    args = ap.parse_args()
    tree = Path(args.tree).resolve() if args.tree else ROOT
    tmp = Path(tempfile.mkdtemp(prefix="bench-compare-"))
    data = Path(args.dir).resolve() / f"compare-{args.events}" if args.dir else tmp / "table"
    data.mkdir(parents=True, exist_ok=True)
    db = f"blkreview_bench_compare_{os.getpid()}"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    try:
        if not (data / "events.npz").exists() or not (data / "results.json").exists():
            print(json.dumps(run(WRITE, [str(args.events), str(data)], env)), flush=True)
        subprocess.run([sys.executable, "-c", (
            "import psycopg\n"
            f"c = psycopg.connect('{PG}/postgres', autocommit=True)\n"
            f"c.execute('DROP DATABASE IF EXISTS \"{db}\"'); c.execute('CREATE DATABASE \"{db}\"')")],
            check=True)
        media = tmp / "media"
        (media / "bench").mkdir(parents=True)
        os.link(data / "events.npz", media / "bench" / "events.npz")  # no copy of GBs
        step_env = {**env, "PYTHONPATH": str(tree), "DATABASE_URL": f"{PG}/{db}",
                    "SECRET_KEY": "bench-" + "x" * 40, "MEDIA_ROOT": str(media),
                    "CELERY_BROKER_URL": "redis://127.0.0.1:6379/15",
                    "DJANGO_SETTINGS_MODULE": "reviewapp.settings", "LOG_LEVEL": "WARNING",
                    "TMPDIR": str(tmp)}
        step_env.pop("PYTEST_VERSION", None)
        subprocess.run([sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"],
                       cwd=tree, env=step_env, check=True)
        load = [round(x, 2) for x in os.getloadavg()]
        res = run(STEP, ["bench/events.npz", str(data / "results.json")], step_env, cwd=tree)
        res.update(events_per_side=args.events, tree=str(tree) if args.tree else "this",
                   loadavg_start=load, loadavg_end=[round(x, 2) for x in os.getloadavg()])
        print(json.dumps(res), flush=True)
        return 0 if res["state"] == "succeeded" else 1
    finally:
        subprocess.run([sys.executable, "-c", (
            "import psycopg\n"
            f"c = psycopg.connect('{PG}/postgres', autocommit=True)\n"
            f"c.execute('DROP DATABASE IF EXISTS \"{db}\" WITH (FORCE)')")], check=False)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
