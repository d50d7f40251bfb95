"""Upload-time check of the first lines of line-based traces."""

import pytest

from workers.errors import ParseError
from workers.traces.precheck import check_head

GOOD = (b"  8,0    0        1     0.000000000   843  G   R 14071424 + 128 [dd]\n"
        b"  8,0    0        2     0.000073424   843  G   R 14071168 + 128 [dd]\n")
BAD = b"  8,0    0        3     0.000173424   843  G   R 1407x + 128 [dd]\n"


def test_malformed_complete_line_raises_with_file_and_line():
    """A malformed complete line in the head is a ParseError naming the file and line."""
    with pytest.raises(ParseError) as err:
        check_head(GOOD + BAD + b"  8,0    0        4     0.0002", name="before.txt",
                   fmt="blkparse")
    assert err.value.path == "before.txt" and err.value.line == 3
    assert "1407x" in err.value.reason


def test_cut_last_line_is_not_judged():
    """The head ends mid-line: that line is the worker's to parse, not an upload error."""
    check_head(GOOD + b"  8,0    0        3     0.000173424   843  G   R 1407", name="x",
               fmt="blkparse")


def test_whole_file_without_newline_is_judged():
    """A complete small file is parsed to its last byte."""
    with pytest.raises(ParseError):
        check_head(GOOD + BAD.rstrip(b"\n"), name="x", fmt="blkparse", complete=True)


@pytest.mark.parametrize("fmt", ["blktrace", "fio-json", "iostat-json", "tar"])
def test_binary_and_json_formats_are_left_to_the_worker(fmt):
    """A cut record stream or JSON document is not an error at upload."""
    check_head(b'{"fio version": "fio-3.33", "jobs": [', name="x", fmt=fmt)
