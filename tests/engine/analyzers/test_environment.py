"""Environment fingerprint and consistency gate on the real 6.1 / 7.2 raid5 captures' manifests
(tests/data/model, copied from ../shared/samples/kernel)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from workers.analyzers import analyze
from workers.analyzers.environment import consistency, fingerprint
from workers.compare import compare
from workers.model.presets import preset_difference
from workers.traces import ingest
from workers.whatif import jsonable

MODEL = Path(__file__).resolve().parents[2] / "data" / "model"


@pytest.fixture(scope="module")
def fps(tmp_path_factory) -> dict:
    out = {}
    for name in ("6.1_W1b", "7.2_W1b"):
        d = tmp_path_factory.mktemp(name)
        for suffix in (".blkparse.txt.xz", ".blkreview.toml"):
            shutil.copy(MODEL / f"{name}{suffix}", d / f"{name}{suffix}")
        ing = ingest(sorted(d.iterdir()))
        res = analyze(ing.table)
        out[name] = (fingerprint(jsonable(ing.manifest), results=res), res,
                     jsonable(ing.manifest))
    return out


def _fields(b: dict, p: dict) -> list[str]:
    return [kv.split("=")[0] for kv in preset_difference(b["kernel"], p["kernel"])]


def test_fingerprint_of_a_real_capture(fps) -> None:
    fp, _, _ = fps["6.1_W1b"]
    assert fp["kernel"] == "6.1.0-57-amd64"
    assert fp["workload"].startswith("dd if=/dev/md0 of=/dev/null bs=2M")
    assert fp["stack"]["kind"] == "raid5" and fp["stack"]["chunk_kb"] == 512
    assert fp["devices"]["254,0"]["scheduler"] == "none"
    assert fp["devices"]["254,0"]["rotational"] == 1
    assert "9,0" in fp["traced"] and len(fp["traced"]) == 9


def test_kernels_61_vs_72_differ_only_in_what_their_presets_explain(fps) -> None:
    b, p = fps["6.1_W1b"][0], fps["7.2_W1b"][0]
    env = consistency(b, p, policy_fields=_fields(b, p))
    items = {d["item"]: d for d in env["diffs"]}
    assert items["kernel"]["expected"]
    member = items["max_sectors_kb of 254,0"]
    assert (member["baseline"], member["patched"]) == ("1280", "4096")
    assert member["expected"] and "max_sectors_cap_kb" in member["why"]
    assert items["chunk_sectors of 9,0"]["expected"]
    assert items["scheduler of 9,0"]["why"] == "not recorded on one side"
    assert not env["warn"], env["unexpected"]
    # without the presets' difference the same limits are unexpected
    bare = consistency(b, p)
    assert bare["warn"] and "max_sectors_kb of 254,0: 1280 -> 4096" in bare["unexpected"]


def test_a_scheduler_change_beyond_the_patch_warns(fps) -> None:
    """A baseline on mq-deadline vs a patched run on none is not a review of the patch."""
    b, res_b, man_b = fps["6.1_W1b"]
    man = {**man_b, "limits": {**man_b["limits"],
                               "254,0": {**man_b["limits"]["254,0"], "scheduler": "mq-deadline"}}}
    other = fingerprint(man, results=res_b)
    env = consistency(other, b, policy_fields=["split_remainder"])
    assert env["warn"] and env["unexpected"] == ["scheduler of 254,0: mq-deadline -> none"]
    cmp = compare([res_b], [res_b], environment=env)
    assert cmp["check"]["state"] == "warning"
    assert "environment differs beyond the patch: scheduler of 254,0" in \
        cmp["check"]["reasons"][0]
    assert compare([res_b], [res_b], environment=env,
                   thresholds={"rule_environment": 0})["check"]["state"] == "success"
    work = consistency({**b, "workload": "dd bs=1M"}, b)
    assert work["warn"] and work["unexpected"][0].startswith("workload: dd bs=1M -> dd if=")
