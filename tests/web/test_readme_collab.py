"""README's CI-bot session and docs/api.md name only API routes that exist."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.urls import Resolver404, resolve

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("doc", ["README.md", "docs/api.md"])
def test_documented_api_paths_resolve(doc):
    """Every /api/v1/... path in the document resolves to a view (ids filled in)."""
    text = (ROOT / doc).read_text()
    paths = set(re.findall(r"/api/v1/[A-Za-z0-9_/<>${}.-]*", text))
    assert paths
    for p in sorted(x for x in paths if x != "/api/v1/"):
        concrete = re.sub(r"<[^>]+>|\$\{?\w+\}?", "1", p.split("?")[0])
        if not concrete.endswith("/"):
            concrete += "/"
        try:
            resolve(concrete)
        except Resolver404:  # pragma: no cover - the assertion message says which
            pytest.fail(f"{doc}: {p} does not resolve")
