"""Seed 000: a model run of the seed's workload prints the seek histogram in the seed layout."""

from __future__ import annotations

import json
import re

from workers.analyzers import analyze
from workers.analyzers.seek import seek_histogram
from workers.compare import compare
from workers.model import bios_from_workload, preset_for_kernel, replay, stack_from_spec
from workers.report import render_report

ROW = re.compile(r"^\s*(\d+) \.\. (\d+)\s+: (\d+)\s+(\d+\.\d)% \|([# ]{40})\|$")


def _predict(kernel: str):
    stack = stack_from_spec("raid5:disks=8,chunk=64k,device=hdd")
    work = bios_from_workload("dd:bs=4480k,count=30,contig=all")
    return stack, replay(work, stack, preset_for_kernel(kernel))


def _check_layout(text: str) -> None:
    lines = text.rstrip("\n").split("\n")
    assert lines[0] == "Read|Write seek"
    m = re.fullmatch(r"cnt (\d+), zero cnt (\d+)", lines[1])
    assert m
    cnt, zero = int(m.group(1)), int(m.group(2))
    assert " ".join(lines[2].split()) == ">=(KB) .. <(KB) : count ratio |distribution |"
    rows = [ROW.match(ln) for ln in lines[3:]]
    assert all(rows)
    edges = [(int(r.group(1)), int(r.group(2))) for r in rows if r]
    assert edges[0] == (0, 1) and all(b == 2 * a for a, b in edges[1:])
    counts = [int(r.group(3)) for r in rows if r]
    assert sum(counts) == cnt and counts[0] >= zero and counts[-1] > 0
    bars = [r.group(5).count("#") for r in rows if r]
    assert max(bars) == 40


def test_seed000_model_run_prints_seed_layout() -> None:
    """Predicted member D streams (6.17 and 6.18 presets) print the seed 000 block layout."""
    for kernel in ("6.17", "6.18"):
        stack, table = _predict(kernel)
        sda = stack.disks()[0].dev
        hist = seek_histogram(table, sda)
        assert hist.stage == "D" and hist.cnt > 0
        _check_layout(hist.text())


def test_seed000_model_runs_compare_and_report() -> None:
    """analyze() takes predicted tables as they are; old vs new gives a report with both sides."""
    _, old = _predict("6.17")
    _, new = _predict("6.18")
    ra, rb = analyze(old), analyze(new)
    json.dumps(ra)
    assert "9,0" in ra["remaps"] and ra["remaps"]["9,0"]["remaps"] > 0
    assert any(g["name"].endswith("*") for g in ra["iostat"]["groups"])
    cmp = compare([ra], [rb])
    text = render_report(cmp, title="seed 000 model: 6.17 vs 6.18")
    assert text.count("Read|Write seek") >= 2 and "Before this patch:" in text
    zero = {m["device"]: m for m in cmp["metrics"] if m["label"] == "zero-seek share"}
    sda = zero["8,0"]
    assert sda["patched"]["mean"] > sda["baseline"]["mean"]
