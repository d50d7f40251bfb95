"""What-if model panel: the baseline's bios replayed under the old and the new policy."""

import lzma
import tomllib
from pathlib import Path

import pytest

from workers.analyzers import analyze
from workers.events import EventTable
from workers.traces import parse_file
from workers.whatif import model_panel, policy_parts, seek_by_stage

DATA = Path(__file__).resolve().parent.parent / "data" / "model"


def _capture(name, tmp_path):
    text = tmp_path / f"{name}.blkparse.txt"
    with lzma.open(DATA / f"{name}.blkparse.txt.xz") as src, open(text, "wb") as dst:
        dst.write(src.read())
    manifest = tomllib.loads((DATA / f"{name}.blkreview.toml").read_text())
    return parse_file(text), manifest


def test_policy_parts_splits_settings_from_knob_names():
    """`field=value` items are overrides; bare names are knobs the page lists."""
    assert policy_parts("split_remainder=head, tag_preempt,plug_order=fifo") == (
        "split_remainder=head,plug_order=fifo", ["tag_preempt"])
    assert policy_parts("") == ("", [])


def test_seed000_whatif_on_the_6_1_capture_predicts_the_observed_baseline(tmp_path):
    """6.1's raid5 2M reads replayed with the 6.1 preset (old) reproduce every member's observed
    D stream in order; the new policy is 6.1 with seed 000's split_remainder=head."""
    table, manifest = _capture("6.1_W1b", tmp_path)
    observed = analyze(table)
    panel = model_panel(policy="split_remainder=head", baseline_kernel=manifest["kernel"],
                        patched_kernel="", manifest=manifest, stack_text="", workload="",
                        table=table, observed=observed)
    assert panel is not None and panel["state"] == "ok", panel
    assert "split_remainder=tail" in panel["policy_old"]
    assert "split_remainder=head" in panel["policy_new"]
    fid = panel["fidelity"]
    members = [d for d in observed["devices"] if d.startswith("254,")]
    assert len(members) == 8
    for dev in members:
        assert fid[dev]["matched_in_order"] == 1.0, dev
        assert fid[dev]["seek_l1"] == 0.0 and fid[dev]["size_l1"] == 0.0, dev
    old_first = panel["predicted_old"]["devices"]
    new_first = panel["predicted_new"]["devices"]
    assert set(members) <= set(old_first) and set(members) <= set(new_first)


def test_model_panel_says_why_when_there_is_nothing_to_replay():
    """No Q events, no kernel or nothing to vary: a readable reason, not an exception."""
    table = EventTable.from_columns(sector=[0], nr_sectors=[8], action=[4])
    observed = analyze(table)
    assert model_panel(policy="", baseline_kernel="", patched_kernel="", manifest=None,
                       stack_text="", workload="", table=table, observed=observed) is None
    no_kernel = model_panel(policy="split_remainder=head", baseline_kernel="", patched_kernel="",
                            manifest=None, stack_text="", workload="", table=table,
                            observed=observed)
    assert no_kernel["state"] == "error" and "kernel" in no_kernel["error"]
    no_q = model_panel(policy="split_remainder=head", baseline_kernel="6.17", patched_kernel="",
                       manifest=None, stack_text="", workload="", table=table, observed=observed)
    assert no_q == {"state": "error", "error": "the baseline trace has no Q events to replay"}


def test_seek_by_stage_computes_every_stage_with_events(tmp_path):
    """The stage selector gets a histogram for each stage the run has, per side and run."""
    table, _ = _capture("7.2_W2a", tmp_path)
    results = analyze(table)
    out = seek_by_stage({"baseline": [(table, results)]})
    (dev,) = [d for d in out]
    stages = set(out[dev])
    assert {"Q", "D", "C"} <= stages
    for stage in stages:
        (run,) = out[dev][stage]["baseline"]
        assert run["stage"] == stage
        assert run["cnt"] >= 0


@pytest.mark.parametrize("kernel", ["6.1.0-57-amd64", "7.2.13"])
def test_no_policy_change_means_predicted_old_equals_new(kernel, tmp_path):
    """Same kernel on both sides and no override: the two predictions are identical."""
    table, manifest = _capture("6.1_W1b", tmp_path)
    panel = model_panel(policy="", baseline_kernel=kernel, patched_kernel=kernel,
                        manifest=manifest, stack_text="", workload="", table=table,
                        observed=analyze(table))
    assert panel["state"] == "ok"
    assert panel["predicted_old"] == panel["predicted_new"]


def test_stack_text_that_is_not_a_spec_says_the_model_used_one_disk(tmp_path):
    """Free-text stack descriptions are not guessed at: the panel says a single disk was used."""
    table, _ = _capture("7.2_W2a", tmp_path)
    panel = model_panel(policy="split_remainder=head", baseline_kernel="7.2.13", patched_kernel="",
                        manifest=None, stack_text="md raid5 of 8 HDDs", workload="",
                        table=table, observed=analyze(table))
    assert panel["state"] == "ok"
    assert "single disk" in panel["stack_note"] and "md raid5 of 8 HDDs" in panel["stack_note"]
    spec = model_panel(policy="split_remainder=head", baseline_kernel="7.2.13", patched_kernel="",
                       manifest=None, stack_text="disk:max_sectors_kb=512", workload="",
                       table=table, observed=analyze(table))
    assert spec["stack_note"] == "from the bundle's stack spec 'disk:max_sectors_kb=512'"



def test_guessed_kernel_version_is_a_warning_on_the_panel(tmp_path):
    """A distribution ABI the preset table cannot place is modelled, and the panel says so."""
    table, _ = _capture("7.2_W2a", tmp_path)
    panel = model_panel(policy="split_remainder=head", baseline_kernel="6.12.0-31-amd64",
                        patched_kernel="", manifest=None, stack_text="", workload="",
                        table=table, observed=analyze(table))
    assert panel["state"] == "ok"
    assert any("distribution ABI" in w for w in panel["warnings"])
    exact = model_panel(policy="split_remainder=head", baseline_kernel="7.2.13",
                        patched_kernel="", manifest=None, stack_text="", workload="",
                        table=table, observed=analyze(table))
    assert exact["warnings"] == []


def test_new_policy_is_the_baseline_preset_plus_the_policy_under_test(tmp_path):
    """6.1 vs 7.2 with split_remainder=head named: the new policy differs from the old in that
    one field only (not in the eight fields of 7.2's preset)."""
    table, manifest = _capture("6.1_W1b", tmp_path)
    panel = model_panel(policy="split_remainder=head", baseline_kernel="6.1.0-57-amd64",
                        patched_kernel="7.2.13+deb14-amd64", manifest=manifest, stack_text="",
                        workload="", table=table, observed=analyze(table))
    assert panel["mode"] == "policy"
    assert [d["field"] for d in panel["policy_diff"]] == ["split_remainder"]
    assert "plug_order=lifo" in panel["policy_new"]  # 6.1's, not 7.2's fifo
    assert "plus the policy under test split_remainder=head" in panel["policy_new_label"]


def test_without_a_policy_the_panel_compares_the_two_presets_and_marks_what_it_cannot_show(
        tmp_path):
    """No policy named, kernels 6.1 and 7.2: the panel says it compares the presets, lists the
    fourteen fields that differ, and marks dio_bio_limit (fixed once the bios are built),
    raid10_chunk_limit (a raid5 stack), sched_wakeup (no md superblock writes traced),
    dm_crypt_split (no dm-crypt), md_flush (no REQ_PREFLUSH write), dm_stripe_chunk_limit (no
    dm-stripe), write_zeroes_chunk (no write-zeroes bio) and the sbitmap fields (not in
    replay) as not exercised by a Q-event replay."""
    table, manifest = _capture("6.1_W1b", tmp_path)
    panel = model_panel(policy="", baseline_kernel="6.1.0-57-amd64",
                        patched_kernel="7.2.13+deb14-amd64", manifest=manifest, stack_text="",
                        workload="", table=table, observed=analyze(table))
    assert panel["mode"] == "presets"
    assert "compares the presets of 6.1.0-57-amd64" in panel["policy_new_label"]
    diff = {d["field"]: d for d in panel["policy_diff"]}
    assert len(diff) == 14, sorted(diff)
    assert diff["dio_bio_limit"]["exercised"] is False
    assert "replayed as submitted" in diff["dio_bio_limit"]["why"]
    assert "md_read_balance" not in diff  # no kernel changed raid1's read_balance rule
    assert diff["raid10_chunk_limit"]["why"] == "no md raid10 in the stack"
    assert diff["sched_wakeup"]["why"] == "no md superblock writes in the trace"
    assert diff["dm_crypt_split"]["why"] == "no dm-crypt in the stack"
    assert diff["md_flush"]["why"] == "no REQ_PREFLUSH write with data in the input"
    assert diff["dm_stripe_chunk_limit"]["why"] == "no dm-stripe in the stack"
    assert diff["write_zeroes_chunk"]["why"] == "no write-zeroes bio in the input"
    assert "not modelled in trace replay" in diff["sbitmap_wakeup"]["why"]
    assert diff["split_remainder"]["exercised"] is True


def test_fidelity_of_the_new_policy_against_the_patched_side(tmp_path):
    """raid5 demo: the new policy's md0 stream (100 x 2048 KB, the baseline's bios) disagrees
    with the observed patched md0 (200 x 1024 KB): its size L1 is 2 (disjoint), while the old
    policy reproduces the baseline's md0 (size L1 0)."""
    table, manifest = _capture("6.1_W1b", tmp_path)
    ptable, _ = _capture("7.2_W1b", tmp_path)
    pobserved = analyze(ptable)
    panel = model_panel(policy="split_remainder=head", baseline_kernel="6.1.0-57-amd64",
                        patched_kernel="7.2.13+deb14-amd64", manifest=manifest, stack_text="",
                        workload="", table=table, observed=analyze(table),
                        patched_table=ptable, patched_observed=pobserved)
    assert pobserved["devices"]["9,0"]["sizes"]["count"] == 200
    assert panel["fidelity"]["9,0"]["size_l1"] == 0.0
    assert panel["fidelity_new"]["9,0"]["size_l1"] == pytest.approx(2.0)
    assert panel["fidelity_new"]["254,0"]["matched_in_order"] is not None


def _with_flushes_and_names(table):
    """The capture plus what the chunked pass must get right: bare flushes (0-sector Q and D
    rows: counted as zero-length, not as seeks) and a device name from the header."""
    import numpy as np

    from workers.events import DeviceInfo

    rows = np.arange(0, len(table), 97)
    flush = table.take(rows)
    flush.nr_sectors[:] = 0
    both = EventTable.concat([table, flush]).sorted_by_time()
    d = int(both.dev[0])
    both.devices[d] = DeviceInfo(dev=d, name="md-top")
    return both


@pytest.mark.parametrize("rows", [1, 1000, 1 << 22])
def test_scan_run_in_chunks_equals_the_whole_table_seek_of_every_stage(tmp_path, rows):
    """The comparison step's chunked pass over a stored table (StoredTable, chunks of 1 and
    1000 rows: hundreds of chunks) gives exactly what seek_by_stage gives for the whole table
    in memory, stage by stage, device by device; and counts the bios every device would
    replay as the top."""
    import numpy as np

    from workers.events import ACT_QUEUE
    from workers.traces.columnstore import StoredTable
    from workers.whatif import SCAN_COLUMNS, scan_run

    for name in ("7.2_W2a", "6.1_W1b"):
        table, _ = _capture(name, tmp_path)
        table = _with_flushes_and_names(table)
        results = analyze(table)
        table.save(tmp_path / "t.npz")
        stored = StoredTable(tmp_path / "t.npz")
        scan = scan_run(stored.chunks(rows=rows, columns=SCAN_COLUMNS), results, bio_limit=50)
        whole = seek_by_stage({"baseline": [(table, results)]})
        assert {dev: {st: v["baseline"][0] for st, v in stages.items()}
                for dev, stages in whole.items()} == scan.seek
        assert any(j["zero_length"] for stages in scan.seek.values() for j in stages.values())
        assert any(j["name"] == "md-top" for stages in scan.seek.values()
                   for j in stages.values())
        q = np.flatnonzero((table.action == ACT_QUEUE) & (table.nr_sectors > 0))
        assert scan.rows == len(table) and scan.bios_total == len(q)
        devs, counts = np.unique(table.dev[q], return_counts=True)
        assert scan.bios == {f"{d >> 20},{d & 0xFFFFF}": c
                             for d, c in zip(devs.tolist(), counts.tolist())}
        assert scan.bio_limit_row == q[49]


def test_scan_run_refuses_chunks_back_in_time_and_scan_table_sorts_first(tmp_path):
    """Issue order is time order: a pass over chunks that go back in time raises (the step then
    reads the whole table), and scan_table of an unsorted table equals seek_by_stage of it."""
    import numpy as np

    from workers.analyzers.stream import table_chunks
    from workers.whatif import OutOfTimeOrder, scan_run, scan_table

    table, _ = _capture("7.2_W2a", tmp_path)
    results = analyze(table)
    shuffled = table.take(np.random.default_rng(5).permutation(len(table)))
    with pytest.raises(OutOfTimeOrder):
        scan_run(table_chunks(shuffled, 100), results)
    whole = seek_by_stage({"patched": [(shuffled, results)]})
    assert {dev: {st: v["patched"][0] for st, v in stages.items()}
            for dev, stages in whole.items()} == scan_table(shuffled, results).seek


def test_model_window_only_over_the_bounds_and_said_on_the_panel(tmp_path):
    """A run within both bounds has no window (the panel is exactly the whole run's, with no
    'window' key); over either bound the model replays the first rows, cut after the
    max_bios-th Q event with data (of any device: the top is not known before), and the
    panel says how many of how many bios of the top device and events it replayed."""
    import numpy as np

    from workers.events import ACT_QUEUE, make_dev
    from workers.traces.columnstore import StoredTable
    from workers.whatif import ModelWindow, scan_run

    table, manifest = _capture("6.1_W1b", tmp_path)
    results = analyze(table)
    table.save(tmp_path / "t.npz")
    stored = StoredTable(tmp_path / "t.npz")
    scan = scan_run(stored.chunks(rows=500), results, bio_limit=200)
    assert scan.bios["9,0"] == 100 and scan.bios_total == 500  # md0 + 8 members
    assert ModelWindow.of(scan, max_events=len(table), max_bios=500) is None
    by_bios = ModelWindow.of(scan, max_events=len(table), max_bios=200)
    assert by_bios is not None and by_bios.events == scan.bio_limit_row + 1 < len(table)
    by_rows = ModelWindow.of(scan, max_events=1000, max_bios=10**6)
    assert by_rows is not None and by_rows.events == 1000
    win = stored.head(by_bios.events)
    top_q = int(np.count_nonzero((win.action == ACT_QUEUE) & (win.dev == make_dev(9, 0))
                                 & (win.nr_sectors > 0)))
    assert 0 < top_q < 100
    kw = dict(policy="split_remainder=head", baseline_kernel=manifest["kernel"],
              patched_kernel="", manifest=manifest, stack_text="", workload="")
    panel = model_panel(**kw, table=win, observed=analyze(win), window=by_bios)
    assert panel["state"] == "ok" and panel["bios"] == top_q
    assert panel["window"]["bios"] == top_q and panel["window"]["total_bios"] == 100
    assert panel["window"]["total_events"] == len(table)
    assert f"the model replayed the first {top_q} of 100 bios of 9,0" in panel["window"]["note"]
    whole = model_panel(**kw, table=stored.to_table(), observed=results)
    assert "window" not in whole and whole["bios"] == 100
