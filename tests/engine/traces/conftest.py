"""Shared fixtures for the trace parser tests."""

from __future__ import annotations

from pathlib import Path

import pytest

DATA = Path(__file__).resolve().parents[2] / "data" / "traces"
SAMPLES = Path("/work/shared/samples")


@pytest.fixture
def data_dir() -> Path:
    """tests/data/traces."""
    return DATA

