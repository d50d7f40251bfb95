"""Data migration: a bundle is per uploader and per upload (issue 10 §4, issue 11).

Before 0004 the same bytes were one bundle whoever uploaded them, so a bundle could sit in
another user's comparison (showing its uploader's kernel and file names there) and on both
sides of one submission. Each such use now gets its own copy: a bundle in a comparison whose
creator is not the bundle's uploader is copied for that creator, and a bundle on both sides of
one comparison gets a copy for the patched side. A copy shares the stored trace bytes (same
``storage_name``), copies the metadata, the analysis results (its own copy of the EventTable
.npz, so replacing one bundle's results never deletes another's) and the latest job.
"""

from __future__ import annotations

import logging
from typing import Any

from django.db import migrations

log = logging.getLogger(__name__)


def _copy_events(name: str, new_bundle_id: int) -> str:
    if not name:
        return ""
    from django.core.files.base import ContentFile
    from django.core.files.storage import default_storage

    try:
        with default_storage.open(name, "rb") as fh:
            data = fh.read()
        return default_storage.save(f"events/{new_bundle_id}/migrated.npz", ContentFile(data))
    except Exception as exc:  # a missing .npz only costs the model panel a re-analysis
        log.warning("bundle copy %s: cannot copy %s: %s", new_bundle_id, name, exc)
        return ""


def _clone(apps: Any, bundle: Any, owner_id: int | None) -> tuple[Any, int | None, int | None]:
    """A copy of ``bundle`` for ``owner_id``: (copy, old result id, new result id)."""
    TraceBundle = apps.get_model("reviewapp", "TraceBundle")
    TraceFile = apps.get_model("reviewapp", "TraceFile")
    BundleResult = apps.get_model("reviewapp", "BundleResult")
    AnalysisJob = apps.get_model("reviewapp", "AnalysisJob")
    copy = TraceBundle.objects.create(
        role=bundle.role, name=bundle.name, kernel=bundle.kernel, stack=bundle.stack,
        limits=bundle.limits, workload=bundle.workload, checksum=bundle.checksum,
        size=bundle.size, parse_status=bundle.parse_status, parse_error=bundle.parse_error,
        uploaded_by_id=owner_id)
    for f in TraceFile.objects.filter(bundle=bundle):
        TraceFile.objects.create(bundle=copy, name=f.name, format=f.format, size=f.size,
                                 checksum=f.checksum, storage_name=f.storage_name)
    job = AnalysisJob.objects.filter(bundle=bundle).order_by("-created", "-pk").first()
    new_job = None
    if job is not None:
        new_job = AnalysisJob.objects.create(
            kind=job.kind, bundle=copy, state=job.state, progress=job.progress,
            message=job.message, error=job.error, error_detail=job.error_detail,
            started=job.started, finished=job.finished)
    result = BundleResult.objects.filter(bundle=bundle).first()
    if result is None:
        return copy, None, None
    new = BundleResult.objects.create(bundle=copy, job=new_job, data=result.data,
                                      ingest=result.ingest,
                                      events_name=_copy_events(result.events_name, copy.pk))
    return copy, result.pk, new.pk


def split_shared_bundles(apps: Any, schema_editor: Any) -> None:
    """Give every (comparison creator, side) use of a foreign or two-sided bundle its copy."""
    Comparison = apps.get_model("reviewapp", "Comparison")
    ComparisonResult = apps.get_model("reviewapp", "ComparisonResult")
    for comparison in Comparison.objects.order_by("pk"):
        swapped: dict[str, dict[int, int]] = {"baseline": {}, "patched": {}}
        base = list(comparison.baseline_bundles.order_by("pk"))
        base_ids = {b.pk for b in base}
        for side, bundles in (("baseline", base),
                              ("patched", list(comparison.patched_bundles.order_by("pk")))):
            rel = (comparison.baseline_bundles if side == "baseline"
                   else comparison.patched_bundles)
            for bundle in bundles:
                foreign = bundle.uploaded_by_id != comparison.created_by_id
                both_sides = side == "patched" and bundle.pk in base_ids
                if not (foreign or both_sides):
                    continue
                copy, old_result, new_result = _clone(apps, bundle, comparison.created_by_id)
                rel.remove(bundle)
                rel.add(copy)
                if old_result is not None and new_result is not None:
                    swapped[side][old_result] = new_result
        # the stored comparison step was computed from the same bytes: point its inputs at the
        # copies' results so it is not queued again
        result = ComparisonResult.objects.filter(comparison=comparison).first()
        if result is not None and isinstance(result.inputs, dict) and any(swapped.values()):
            inputs = dict(result.inputs)
            for side, ids in swapped.items():
                inputs[side] = sorted(ids.get(i, i) for i in inputs.get(side) or [])
            result.inputs = inputs
            result.save(update_fields=["inputs"])


class Migration(migrations.Migration):

    dependencies = [
        ("reviewapp", "0004_access_grant_bundle_per_upload"),
    ]

    operations = [
        migrations.RunPython(split_shared_bundles, migrations.RunPython.noop),
    ]
