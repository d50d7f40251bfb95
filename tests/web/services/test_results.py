"""The comparison step: compare + check + model panel + charts, stored atomically."""

from __future__ import annotations

import json

import pytest

from reviewapp.models import ComparisonChart, ComparisonResult

pytestmark = pytest.mark.django_db


def test_finished_comparison_has_charts_for_every_section(finished_comparison):
    """Every section has a stored payload per device, and seek one per stage."""
    result = ComparisonResult.objects.get(comparison=finished_comparison)
    assert result.state == "succeeded", result.error
    sections = set(ComparisonChart.objects.filter(comparison=finished_comparison)
                   .values_list("section", flat=True))
    assert sections == {"fragmentation", "seek", "throughput", "latency", "ordering", "model"}
    chart = ComparisonChart.objects.get(comparison=finished_comparison, section="seek",
                                        dev="254,0", stage="")
    data = json.loads(chart.payload)
    assert data["stage"] == "D"
    assert "Q" in data["stages"] and "D" in data["stages"]
    panels = data["charts"][0]["panels"]
    assert [p["side"] for p in panels] == ["baseline", "patched"]
