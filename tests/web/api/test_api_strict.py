"""Strict mode on the upload (issue 10 item 14): the REST/form ``strict`` field is stored on
the bundle and the analysis of a damaged blktrace fails with the offset instead of skipping it."""

from __future__ import annotations

import struct

import pytest

from reviewapp.models import AnalysisJob, BundleResult, TraceBundle
from reviewapp.tasks import run_analysis
from workers.events import ACT_QUEUE, RWBS_READ, EventTable, make_dev
from workers.traces.writers import encode_blktrace

pytestmark = pytest.mark.django_db


def damaged_blktrace(n: int = 300) -> bytes:
    """n Q records, the 11th with a pdu_len of 32784 that lands on a later record."""
    table = EventTable({"time_ns": [1000 * (i + 1) for i in range(n)],
                        "seq": list(range(1, n + 1)), "dev": [make_dev(8, 0)] * n,
                        "cpu": [0] * n, "pid": [7] * n, "action": [ACT_QUEUE] * n,
                        "rwbs": [RWBS_READ] * n, "sector": [8 * i for i in range(n)],
                        "nr_sectors": [8] * n})
    data = bytearray(encode_blktrace(table, process_notes=False))
    struct.pack_into("<H", data, 480 + 46, 48 * 100)
    return bytes(data)


@pytest.mark.parametrize("strict", [False, True])
def test_strict_field_decides_the_job(api_client, check, make_upload, strict):
    """Lenient: the job succeeds and its ingest warnings name the corrupt record; strict: the
    job fails with file, byte offset and reason."""
    data = damaged_blktrace()
    r = api_client.post("/api/v1/bundles/", {
        "files": [make_upload("sda.blktrace.0", data)], "strict": "true" if strict else "false"},
        format="multipart")
    body = check(r, "post", "/api/v1/bundles/")
    assert r.status_code == 201 and body["strict"] is strict
    bundle = TraceBundle.objects.get(pk=body["id"])
    job = AnalysisJob.objects.get(bundle=bundle)
    run_analysis(job.pk)
    job.refresh_from_db()
    if strict:
        assert job.state == "failed"
        assert "sda.blktrace.0, byte 480: corrupt record: payload length 4800" in job.error
    else:
        assert job.state == "succeeded", job.error
        warnings = BundleResult.objects.get(bundle=bundle).ingest["warnings"]
        assert any("byte 480: corrupt record" in w and "skipped" in w for w in warnings)
        assert not any("relay buffer dropped" in w for w in warnings)


def test_strict_checkbox_on_the_form(logged_in_client, make_upload, seed000_before,
                                     seed000_after):
    """The upload form's 'Strict parsing' box reaches both bundles."""
    r = logged_in_client.post("/upload/", {
        "title": "strict", "baseline_files": [make_upload("b.txt", seed000_before)],
        "patched_files": [make_upload("p.txt", seed000_after)], "strict": "on"})
    assert r.status_code == 302
    assert sorted(TraceBundle.objects.values_list("strict", flat=True)) == [True, True]
    assert 'name="strict"' in logged_in_client.get("/upload/").content.decode()
