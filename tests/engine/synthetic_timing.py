"""Synthetic blkparse traces for timing verdicts: one disk, queue depth 1, D and C per request.

A run reads ``n`` sequential requests of ``nr`` sectors; each takes a service time of
``base_us * slowdown`` times a per-request lognormal jitter (sigma 0.1) times a per-run factor
drawn from N(1, run_sd) -- the run-to-run noise of a real machine (cache state, frequency,
placement). ``slowdown = 1 / 0.85`` is a controlled 15% throughput drop.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np


def timing_run_text(seed: int, *, slowdown: float = 1.0, n: int = 1500, nr: int = 256,
                    base_us: float = 1000.0, run_sd: float = 0.03) -> str:
    rng = np.random.default_rng(seed)
    run_factor = rng.normal(1.0, run_sd)
    svc_ns = base_us * 1000 * slowdown * run_factor * rng.lognormal(0.0, 0.1, size=n)
    lines = []
    t = 0.0
    seq = 1
    for i in range(n):
        sector = 2048 + i * nr
        lines.append(f"8,0 0 {seq} {t / 1e9:.9f} 100 D R {sector} + {nr} [dd]")
        seq += 1
        t += svc_ns[i]
        lines.append(f"8,0 0 {seq} {t / 1e9:.9f} 0 C R {sector} + {nr} [0]")
        seq += 1
        t += 20_000.0  # 20 us between a completion and the next dispatch
    return "\n".join(lines) + "\n"


def timing_runs(tmp: Path, prefix: str, seeds: range | list[int], **kw: float) -> list[Path]:
    out = []
    for s in seeds:
        p = tmp / f"{prefix}{s}.blkparse.txt"
        p.write_text(timing_run_text(s, **kw))  # type: ignore[arg-type]
        out.append(p)
    return out
