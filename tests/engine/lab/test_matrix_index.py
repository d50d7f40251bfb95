"""index.json of a matrix directory shared by two runs: each writes only its own entries."""

from __future__ import annotations

import json
from pathlib import Path

from workers.lab.matrix import _Index


def test_two_runs_sharing_an_out_dir_keep_each_others_cells(tmp_path: Path) -> None:
    path = tmp_path / "index.json"
    path.write_text(json.dumps({"cells": {"6.1/old": {"ok": True}},
                                "skipped": {"7.0.13": "no modules", "6.16": "no modules"}}))
    first, second = _Index(path), _Index(path)  # both started before either wrote
    second.cells["7.3/r10n2_d4_c64_blkdiscard"] = {"ok": True, "split": "calibration"}
    second.unskip("6.16")
    second.write()
    first.cells["6.1/r10n2_d4_c64_blkdiscard"] = {"ok": True, "split": "calibration"}
    first.skipped["7.1.8"] = "no modules"
    first.write()  # the run that started first writes last: it must not drop the second's
    got = json.loads(path.read_text())
    assert set(got["cells"]) == {"6.1/old", "7.3/r10n2_d4_c64_blkdiscard",
                                 "6.1/r10n2_d4_c64_blkdiscard"}
    assert got["skipped"] == {"7.0.13": "no modules", "7.1.8": "no modules"}
    assert not list(tmp_path.glob(".index.json.*.tmp"))


def test_first_write_creates_the_file(tmp_path: Path) -> None:
    index = _Index(tmp_path / "index.json")
    index.cells["k/c"] = {"ok": False, "reason": "boot failed"}
    index.write()
    assert json.loads((tmp_path / "index.json").read_text()) == {
        "cells": {"k/c": {"ok": False, "reason": "boot failed"}}, "skipped": {}}
