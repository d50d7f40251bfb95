"""Fidelity: real captures replayed with their kernel's preset, scored against their D events."""

import json
import lzma
import shutil
from pathlib import Path

import numpy as np
import pytest

from workers.__main__ import main
from workers.errors import BlkreviewError
from workers.fidelity import _in_order, markdown_table, score_all, score_capture, summarize

DATA = Path(__file__).resolve().parent.parent / "data" / "model"


def _capture_dir(root: Path, kernel_dir: str, name: str) -> Path:
    """A capture directory (trace + manifest) from the committed development captures."""
    d = root / kernel_dir / name
    d.mkdir(parents=True)
    with lzma.open(DATA / f"{name}.blkparse.txt.xz") as src, \
            open(d / "all.blkparse.txt", "wb") as dst:
        shutil.copyfileobj(src, dst)
    shutil.copy(DATA / f"{name}.blkreview.toml", d / "blkreview.toml")
    (d / "commands.txt").write_text("+ dd if=/dev/md0 of=/dev/null\n")  # skipped, not an error
    return d


@pytest.fixture(scope="module")
def captures(tmp_path_factory):
    root = tmp_path_factory.mktemp("captures")
    for kdir, prefix in (("6.1.0-57-amd64", "6.1"), ("7.2.13+deb14-amd64", "7.2")):
        for w in ("W1b", "W2a"):
            _capture_dir(root, kdir, f"{prefix}_{w}")
    return root


def test_in_order_counts_missing_and_invented_requests_alike():
    obs = np.array([[0, 8], [8, 8], [16, 8], [24, 8]])
    assert _in_order(obs, obs) == 1.0
    assert _in_order(obs, obs[:2]) == 0.5  # two requests missing
    assert _in_order(obs, np.concatenate([obs, [[99, 8]] * 4])) == 0.5  # four invented
    assert _in_order(obs, obs[::-1]) == 0.25  # all there, reversed order
    assert _in_order(obs[:0], obs[:0]) == 1.0


def test_own_kernel_preset_reproduces_every_development_capture(captures):
    """The four development captures (the model was checked against them) score 100%."""
    calls: list[tuple[int, int]] = []
    scores = score_all([captures], progress=lambda done, total: calls.append((done, total)))
    # the CLI's bar: captures done/total, from 0 to all of them
    assert calls[0] == (0, len(scores)) and calls[-1] == (len(scores), len(scores))
    assert [d for d, _ in calls] == sorted(d for d, _ in calls)
    assert len(scores) == 4
    for s in scores:
        assert s.error is None, s.error
        assert s.mode == "order"
        assert s.score == 1.0, (s.name, s.kernel)
    raid = next(s for s in scores if s.name.endswith("W1b") and s.kernel.startswith("6.1"))
    assert len(raid.devices) == 8 and raid.cross_device == 1.0


def test_another_kernels_preset_is_caught_by_the_cross_device_order(captures):
    """6.1 issues a 2M raid5 read's chunks out of order across members; the 7.2 preset
    ascends: every member's own stream still matches, the order across members does not."""
    s = score_capture(captures / "6.1.0-57-amd64" / "6.1_W1b", kernel="7.2.13")
    assert s.kernel == "6.1.0-57-amd64" and s.preset == "7.2.13"
    assert all(d.score == 1.0 for d in s.devices)
    assert s.cross_device is not None and s.cross_device < 0.9
    assert s.score is not None and s.score < 1.0


def test_distribution_mode_scores_histograms(captures):
    s = score_capture(captures / "7.2.13+deb14-amd64" / "7.2_W2a", mode="distribution")
    assert s.mode == "distribution" and s.score == 1.0
    (dev,) = s.devices
    assert dev.size_l1 == 0.0 and dev.seek_l1 == 0.0 and dev.in_order is None


def test_calibration_is_reported_apart_from_held_out(captures):
    scores = score_all([captures], calibration=["*/6.1_*"], kernel="7.2.13")
    cal = [s for s in scores if s.calibration]
    assert {s.name for s in cal} == {"6.1_W1b", "6.1_W2a"}
    table = markdown_table(scores)
    assert "- calibration: 2 captures" in table and "- held out: 2 captures" in table
    assert "(cal)" in table and "preset of 7.2.13" in table
    held = summarize([s for s in scores if not s.calibration])
    assert held.mean == 1.0


def test_a_capture_the_model_cannot_take_is_reported_not_raised(tmp_path):
    d = _capture_dir(tmp_path, "k", "7.2_W2a")
    (d / "blkreview.toml").write_text('kernel = "7.2.13"\n[stack]\ntop = "9,0"\nkind = "raid9"\n')
    s = score_capture(d)
    assert s.score is None and s.error


def test_cli_table_write_json_and_thresholds(captures, tmp_path, capsys):
    out = tmp_path / "fidelity.md"
    assert main(["fidelity", str(captures), "--write", str(out)]) == 0
    text = capsys.readouterr().out
    assert "| W1b" not in text and "| 6.1_W1b | 100.0% |" in text
    assert out.read_text() == text
    assert main(["fidelity", str(captures), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["held_out"]["count"] == 4 and data["held_out"]["worst"] == 1.0
    assert main(["fidelity", str(captures), "--kernel", "7.2.13", "--min-worst", "0.95"]) == 1
    capsys.readouterr()
    assert main(["fidelity", str(tmp_path / "nothing")]) == 2
    assert "no such file" in capsys.readouterr().err


def test_racing_threads_pick_distribution_mode():
    from workers.events import ACT_QUEUE, EventTable, make_dev
    from workers.fidelity import racing_threads

    dev = make_dev(8, 0)
    one = EventTable.from_columns(dev=[dev] * 3, pid=[5] * 3, action=[ACT_QUEUE] * 3,
                                  sector=[0, 8, 16], nr_sectors=[8] * 3)
    many = EventTable.from_columns(dev=[dev] * 3, pid=[5, 6, 7], action=[ACT_QUEUE] * 3,
                                   sector=[0, 8, 16], nr_sectors=[8] * 3)
    assert not racing_threads(one, dev) and racing_threads(many, dev)


def _another_run(root: Path, kernel_dir: str, name: str, drop_every: int) -> Path:
    """The same capture "run again": every ``drop_every``-th D event is missing (a request the
    other run merged away), the rest as it was."""
    d = _capture_dir(root, kernel_dir, name)
    lines = (d / "all.blkparse.txt").read_text().splitlines(keepends=True)
    kept, seen = [], 0
    for ln in lines:
        if "  D  " in ln:
            seen += 1
            if seen % drop_every == 0:
                continue
        kept.append(ln)
    (d / "all.blkparse.txt").write_text("".join(kept))
    return d


def test_against_another_run_scores_the_replay_and_the_kernel_itself(captures, tmp_path):
    """--against: the replay of one run is scored against another run's D events; --real
    scores the first run's own D events there (the kernel's run-to-run agreement)."""
    other = _another_run(tmp_path / "rep", "7.2.13+deb14-amd64", "7.2_W2a", drop_every=10)
    cap = captures / "7.2.13+deb14-amd64" / "7.2_W2a"
    model = score_capture(cap, against=other)
    kernel = score_capture(cap, against=other, real=True)
    assert model.error is None and kernel.error is None
    # 60 of the 600 requests are missing in the other run: in-order share 540/600 per the
    # order score, for the replay (100% on its own run) and the run itself alike
    assert model.score is not None and 0.85 < model.score < 1.0
    assert kernel.score == pytest.approx(model.score)
    assert score_capture(cap, against=cap, real=True).score == 1.0
    # only captures with a namesake in the other folder are scored
    scores = score_all([captures], against=[tmp_path / "rep"], real=True)
    assert [(s.kernel, s.name) for s in scores] == [("7.2.13+deb14-amd64", "7.2_W2a")]
    with pytest.raises(BlkreviewError, match="--real needs --against"):
        score_all([captures], real=True)


def test_against_a_run_of_another_kernel_is_an_error_not_a_score(captures, tmp_path):
    other = _capture_dir(tmp_path, "7.2.13+deb14-amd64", "6.1_W2a")
    s = score_capture(captures / "7.2.13+deb14-amd64" / "7.2_W2a", against=other)
    assert s.score is None and "another kernel" in (s.error or "")


def test_cli_against_and_real(captures, tmp_path, capsys):
    _another_run(tmp_path / "rep", "6.1.0-57-amd64", "6.1_W2a", drop_every=5)
    assert main(["fidelity", str(captures), "--against", str(tmp_path / "rep"), "--real",
                 "--json"]) == 0
    got = json.loads(capsys.readouterr().out)["captures"]
    assert [c["name"] for c in got] == ["6.1_W2a"] and got[0]["score"] < 0.9
    assert main(["fidelity", str(captures), "--real"]) == 2
    assert "--real needs --against" in capsys.readouterr().err


def test_a_kernel_folder_of_a_lab_out_keeps_the_index_s_split(captures, tmp_path):
    """Scoring one kernel's folder (or one capture) of a lab ``--out`` reads the
    ``index.json`` above it: its calibration cells stay calibration, its failed cells stay
    out (before, every capture of ``DIR/<kernel>`` was counted as held out)."""
    root = tmp_path / "out"
    shutil.copytree(captures / "6.1.0-57-amd64", root / "6.1.0-57-amd64")
    (root / "index.json").write_text(json.dumps({"cells": {
        "6.1.0-57-amd64/6.1_W1b": {"split": "calibration", "ok": True},
        "6.1.0-57-amd64/6.1_W2a": {"split": "evaluation", "ok": True}}}))
    for path in (root / "6.1.0-57-amd64", root / "6.1.0-57-amd64" / "6.1_W1b"):
        cal = {s.name: s.calibration for s in score_all([path])}
        assert cal["6.1_W1b"] is True
        if "6.1_W2a" in cal:
            assert cal["6.1_W2a"] is False
