"""comparison_create, comparison_add_bundles, submission_create (patch + both sides at once)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db import transaction

from reviewapp import constants as c
from reviewapp.models import Comparison, Patch, Thread, TraceBundle
from reviewapp.services import UploadRejected
from reviewapp.services.bundles import bundle_create, bundle_validate
from reviewapp.services.jobs import comparison_refresh_status, job_ensure_for_bundle
from reviewapp.services.patches import patch_create

SIDES = (c.ROLE_BASELINE, c.ROLE_PATCHED)


def clean_policy(policy: str) -> str:
    """``"split_remainder=head, bio_build=align:262144"`` -> normalized, fields checked.

    A bare field name (the knob under test, no value) is accepted too.
    """
    from workers.errors import ModelConfigError
    from workers.model.policy import POLICY_FIELDS, Policy

    items = [p.strip() for p in (policy or "").split(",") if p.strip()]
    out = []
    for item in items:
        key, _, value = item.partition("=")
        key = key.strip()
        if key not in POLICY_FIELDS:
            raise UploadRejected(
                f"policy: unknown field {key!r} (known: {', '.join(POLICY_FIELDS)})",
                field="policy",
            )
        if value.strip():
            try:  # the engine checks the value against the field's choices
                Policy().with_overrides({key: value.strip()})
            except ModelConfigError as exc:
                raise UploadRejected(f"policy: {exc}", field="policy") from exc
        out.append(f"{key}={value.strip()}" if value.strip() else key)
    return ",".join(out)


def comparison_create(*, patch: Patch, baseline: Sequence[TraceBundle],
                      patched: Sequence[TraceBundle], policy: str = "", public: bool = True,
                      user: Any = None, thresholds: Any = None) -> Comparison:
    """A comparison of ``baseline`` runs against ``patched`` runs; queues missing analyses.

    ``thresholds`` overrides settings.BLKREVIEW_CHECK_THRESHOLDS for this comparison's check
    (a dict or ``"name=value,..."``).
    """
    from reviewapp.services.results import clean_thresholds

    if not baseline:
        raise UploadRejected("baseline: at least one bundle is required", field="baseline")
    if not patched:
        raise UploadRejected("patched: at least one bundle is required", field="patched")
    policy = clean_policy(policy)
    limits = clean_thresholds(thresholds)
    with transaction.atomic():
        comparison = Comparison.objects.create(
            patch=patch, policy=policy, public=public, thresholds=limits,
            created_by=user if getattr(user, "is_authenticated", False) else None,
        )
        comparison.baseline_bundles.set(baseline)
        from reviewapp.services.events import event_create

        event_create(kind=c.EVENT_COMPARISON_CREATED, actor=user, patch=patch,
                     comparison=comparison)
        comparison.patched_bundles.set(patched)
        Thread.objects.create(comparison=comparison, title="Discussion", created_by=comparison.created_by)
        for bundle in list(baseline) + list(patched):
            job_ensure_for_bundle(bundle=bundle)
        comparison_refresh_status(comparison=comparison)
    return comparison


def comparison_add_bundles(*, comparison: Comparison, side: str,
                           bundles: Sequence[TraceBundle]) -> Comparison:
    """More runs on one side of an existing comparison (issue 2 item 1)."""
    if side not in SIDES:
        raise UploadRejected(f"side must be one of {', '.join(SIDES)}", field="side")
    if not bundles:
        raise UploadRejected("no bundles given", field="bundles")
    with transaction.atomic():
        target = comparison.baseline_bundles if side == c.ROLE_BASELINE else comparison.patched_bundles
        target.add(*bundles)
        for bundle in bundles:
            job_ensure_for_bundle(bundle=bundle)
        comparison_refresh_status(comparison=comparison)
    return comparison


def submission_create(*, title: str = "", version: str = "", author: str = "",
                      mail: Any = None, baseline_files: Sequence[Any],
                      patched_files: Sequence[Any], baseline_kernel: str = "",
                      patched_kernel: str = "", stack: str = "", limits: str = "",
                      workload: str = "", policy: str = "", public: bool = True,
                      user: Any = None, thresholds: Any = None, patch: Patch | None = None,
                      baseline_bundles: Sequence[TraceBundle] | None = None,
                      strict: bool = False,
                      ) -> tuple[Comparison, dict[str, tuple[TraceBundle, bool]]]:
    """Patch + one bundle per side + the comparison, in one go (the form and /submissions/).

    ``patch`` attaches the comparison to an existing patch (one of a series) instead of
    creating one; ``baseline_bundles`` reuses runs already uploaded (the Fixes:-aware pairing:
    the patched runs of the fixed commit's comparison) instead of ``baseline_files``.
    Everything is validated before anything is stored: metadata, both sides' files and the
    uploader's daily quota. ``strict``: a damaged binary record fails the analysis.
    """
    meta, raw = (None, "")
    if mail is not None and patch is None:
        from reviewapp.services.patches import patch_meta_from_upload

        meta, raw = patch_meta_from_upload(mail)
    if patch is None and not (title or (meta and meta.title)):
        raise UploadRejected("a patch title is required (or a patch mail to take it from)",
                             field="title")
    policy = clean_policy(policy)
    from reviewapp.services.results import clean_thresholds

    clean_thresholds(thresholds)  # reject bad thresholds before storing any file
    sides = [("patched", patched_files)]
    if not baseline_bundles:
        sides.insert(0, ("baseline", baseline_files))
    for label, files in sides:
        bundle_validate(files=files, side_label=label)
    from reviewapp.services.limits import upload_quota_check

    upload_quota_check(user=user, count=len(sides), nbytes=sum(
        int(getattr(f, "size", 0) or 0) for _, files in sides for f in files if f is not None))
    with transaction.atomic():
        bundles = {}
        if not baseline_bundles:
            bundles[c.ROLE_BASELINE] = bundle_create(
                files=baseline_files, role=c.ROLE_BASELINE, kernel=baseline_kernel, stack=stack,
                limits=limits, workload=workload, user=user, side_label="baseline",
                strict=strict)
        bundles[c.ROLE_PATCHED] = bundle_create(
            files=patched_files, role=c.ROLE_PATCHED, kernel=patched_kernel, stack=stack,
            limits=limits, workload=workload, user=user, side_label="patched", strict=strict)
        baseline = (list(baseline_bundles) if baseline_bundles
                    else [bundles[c.ROLE_BASELINE][0]])
        if patch is None:
            patch = patch_create(title=title, version=version, author=author, meta=meta,
                                 raw=raw, user=user, public=public)
        comparison = comparison_create(
            patch=patch, baseline=baseline,
            patched=[bundles[c.ROLE_PATCHED][0]], policy=policy, public=public, user=user,
            thresholds=thresholds,
        )
    return comparison, bundles
