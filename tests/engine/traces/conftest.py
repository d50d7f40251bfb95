"""Shared fixtures for the trace parser tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.shared import shared_dir

REPO_ROOT = Path(__file__).resolve().parents[3]
DATA = REPO_ROOT / "tests" / "data" / "traces"
#: Where the shared samples live: ``$BLKREVIEW_SHARED/samples``, else ``shared/samples`` beside
#: the repository (a CI clone has ``shared/`` next to it); tests/shared.py.
SAMPLE_ROOTS = (shared_dir() / "samples",)


def find_samples() -> Path | None:
    """The first shared samples directory that exists, or None (a bare clone)."""
    for root in SAMPLE_ROOTS:
        if root.is_dir():
            return root
    return None


@pytest.fixture
def data_dir() -> Path:
    """tests/data/traces."""
    return DATA


@pytest.fixture
def samples_dir() -> Path:
    """The shared samples directory; skips (naming the places looked at) when there is none.

    A skip, not a failure: a plain clone has no ``shared/`` beside it, and the same
    equivalence is asserted against the committed golden files in tests/data/traces/.
    """
    root = find_samples()
    if root is None:
        pytest.skip("shared samples not found in " + ", ".join(map(str, SAMPLE_ROOTS)))
    return root
