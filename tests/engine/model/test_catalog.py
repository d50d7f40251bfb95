"""Policy fields listed (replay --list-policies, docs/model.md) and every --policy knob checked."""

from __future__ import annotations

from pathlib import Path

import pytest

from workers.__main__ import main
from workers.errors import ModelConfigError
from workers.model import preset_for_kernel
from workers.model.catalog import field_docs, markdown_table
from workers.model.policy import CHOICES, POLICY_FIELDS

DOCS = Path(__file__).resolve().parents[3] / "docs" / "model.md"
DEMO = Path(__file__).resolve().parents[3] / "reviewapp" / "demo"


def test_every_field_has_values_a_description_and_its_kernels() -> None:
    """No field without a sentence; the kernels of split_remainder and plug_order are right."""
    docs = {d.name: d for d in field_docs()}
    assert list(docs) == list(POLICY_FIELDS)
    assert all(len(d.what) > 20 for d in docs.values()), [d.name for d in docs.values()
                                                          if len(d.what) <= 20]
    assert docs["split_remainder"].kernels[-1][:2] == ("6.18.0", "head")
    assert [k[1] for k in docs["plug_order"].kernels] == ["fifo_sorted", "lifo", "fifo"]
    assert docs["plug_order"].values == " | ".join(CHOICES["plug_order"])


def test_list_policies_prints_every_field(capsys) -> None:
    """``replay --list-policies`` needs no input and names every field with its values."""
    assert main(["replay", "--list-policies"]) == 0
    out = capsys.readouterr().out
    for name in POLICY_FIELDS:
        assert f"\n{name} = " in "\n" + out, name
    assert "head from 6.18.0: b2f5974079d8" in out


def test_docs_model_md_carries_the_same_table() -> None:
    """docs/model.md's table is exactly what the code generates."""
    text = DOCS.read_text()
    start = text.index("<!-- policy-table")
    body = text[text.index("\n", start) + 1: text.index("<!-- /policy-table -->")].strip()
    assert body == markdown_table()


def test_every_bad_knob_is_reported_at_once() -> None:
    """A bad value after a good one, an unknown field and a malformed item: all named."""
    with pytest.raises(ModelConfigError) as err:
        preset_for_kernel("6.1").with_overrides(
            "split_remainder=head,plug_order=bogus,foo=1,max_plug_count=x,tag_preempt")
    msg = str(err.value)
    for needle in ("plug_order='bogus'", "unknown policy field 'foo'", "max_plug_count='x'",
                   "'tag_preempt' is not key=value"):
        assert needle in msg, msg


def test_replay_takes_a_capture_directory_and_says_what_is_wrong(capsys, tmp_path) -> None:
    """``--trace DIR`` (and ``--manifest DIR``) replays the directory's bundle; a bad path or a
    bad second knob is one error line, never a traceback."""
    run = str(DEMO / "k61_W1b")
    assert main(["replay", "--trace", run, "--manifest", run, "--quiet"]) == 0
    assert main(["replay", "--trace", run, "--json"]) == 0
    assert '"split_remainder": "tail"' in capsys.readouterr().out  # 6.1 from the manifest
    assert main(["replay", "--trace", str(tmp_path / "missing"), "--quiet"]) == 2
    assert main(["replay", "--trace", run, "--quiet", "--policy",
                 "split_remainder=head,plug_order=nope"]) == 2
    assert main(["replay", "--trace", run, "--quiet", "--emit", "blkparse", "-o",
                 str(tmp_path / "no" / "such" / "dir" / "out.txt")]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert "no such file" in err and "plug_order='nope'" in err
    assert "No such file or directory" in err
