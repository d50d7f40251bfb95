"""Template filters of reviewapp.templatetags.review_extras."""

from __future__ import annotations

from types import SimpleNamespace

from reviewapp.templatetags.review_extras import file_summary


def _f(name: str, fmt: str) -> SimpleNamespace:
    return SimpleNamespace(name=name, format=fmt)


def test_file_summary_folds_per_cpu_blktrace_files_per_device():
    """md0/vda .blktrace.0/.1 read as one line per CPU set; other files keep name and format."""
    files = [_f("blkreview.toml", "manifest"), _f("md0.blktrace.0", "blktrace"),
             _f("md0.blktrace.1", "blktrace"), _f("vda.blktrace.0", "blktrace"),
             _f("vda.blktrace.1", "empty"), _f("iostat.txt", "iostat")]
    assert file_summary(files) == (
        "6 files: blkreview.toml (manifest); iostat.txt (iostat); blktrace per CPU 0,1: md0, "
        "vda; empty (idle CPU, skipped): vda.blktrace.1")
    assert file_summary([_f("a.txt", "blkparse")]) == "1 file: a.txt (blkparse)"
