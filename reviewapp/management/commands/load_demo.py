"""``manage.py load_demo``: a demo user and two before/after comparisons.

1. Seed 000 (comparison 1): the blkparse G-stage lines quoted in seed 000_bd92b2ca435366b4.txt
   (7 lines before the patch, 8 after), shipped in reviewapp/demo/. Only G events: the page
   shows what a quote in a mail allows (seek, sizes) and says what it cannot compute.
2. Real captures of the same workload on kernels 6.1 and 7.2 (md raid5 of 8 virtio disks,
   512K chunk, max_sectors_kb 1024, ``dd bs=2M iflag=direct``): the binary per-CPU blktrace
   files of md0 and its members plus the capture's blkreview.toml (kernel, stack, limits),
   copied from the shared folder's samples/kernel/*/W1b_raid5_c512_msk1024_dd2M into
   reviewapp/demo/k61_W1b and k72_W1b. D-stage seek histograms, the iostat-like table,
   ordering across members and the model panel (policy under test split_remainder=head).

3. A three-version patch series (reviewapp/demo/series/, the same illustrative mails as
   tests/data/mbox/series_split_head_v{1,2,3}.mbox) with a comparison per version on seed 000's
   quoted lines: **illustration only** - v1's patched side is the unpatched trace (v1 did not
   change the order), v2 and v3 use the patched lines, so the series page shows v2 fixing the
   backward seeks. A second demo user ``reviewer`` adds threads (a metric row, a diff line),
   a Tested-by and a Reviewed-by, a thread on a time window of v2's throughput chart, and a CI
   check per version (context ``ci-md-raid5``); v3 is shared with ``reviewer`` (Share panel),
   who is also a maintainer (sets any patch's review state).
   The patch its ``Fixes:`` tag names is there too (commit d89d87965dcb, illustration only)
   with a comparison, so the upload form for the series' patch 2 offers its runs as baseline.

By default the analysis runs right here, in this process, through the same functions the
Celery tasks call, so both pages are ready when the server starts; ``--queue`` leaves it to
the worker instead. Idempotent: running it again reuses the user and the comparisons.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.contrib.auth import get_user_model
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management.base import BaseCommand
from django.db import transaction

from reviewapp import constants as c
from reviewapp.models import AnalysisJob, BundleResult, Comparison
from reviewapp.services.comparisons import submission_create

DEMO_DIR = Path(__file__).resolve().parents[2] / "demo"
TITLE = "block: place split bios at the head of current->bio_list"
RAID5_TITLE = "raid5 reads on 6.1 vs 7.2: dd 2M O_DIRECT over an 8-disk md raid5 (real captures)"


def _demo_files(sub: str) -> list[SimpleUploadedFile]:
    """Every file of a demo capture directory, as uploads (binary blktrace + blkreview.toml)."""
    return [SimpleUploadedFile(p.name, p.read_bytes(), "application/octet-stream")
            for p in sorted((DEMO_DIR / sub).iterdir()) if p.is_file()]


#: The demo comparisons, in creation order (comparison 1 is seed 000: tests rely on it).
DEMOS: tuple[dict[str, Any], ...] = (
    {"title": TITLE, "author": "Yu Kuai",
     "baseline": lambda: [SimpleUploadedFile(
         "seed000_before.blkparse.txt", (DEMO_DIR / "seed000_before.blkparse.txt").read_bytes(),
         "text/plain")],
     "patched": lambda: [SimpleUploadedFile(
         "seed000_after.blkparse.txt", (DEMO_DIR / "seed000_after.blkparse.txt").read_bytes(),
         "text/plain")],
     "baseline_kernel": "6.17 (before the patch)", "patched_kernel": "6.18 (with the patch)",
     "stack": "md raid5 of 8 disks, 64k chunk (seed 000); trace of member 8,0",
     "workload": "dd if=/dev/md0 of=/dev/null bs=4480k iflag=direct",
     "policy": "split_remainder=head"},
    {"title": RAID5_TITLE, "author": "blkreview demo",
     "baseline": lambda: _demo_files("k61_W1b"), "patched": lambda: _demo_files("k72_W1b"),
     "baseline_kernel": "6.1.0-57-amd64", "patched_kernel": "7.2.13+deb14-amd64",
     "stack": "md raid5 of 8 virtio disks (vda..vdh), 512K chunk, md0 max_sectors_kb 1024",
     "workload": "dd if=/dev/md0 of=/dev/null bs=2M count=100 iflag=direct",
     "policy": "split_remainder=head"},
)


class Command(BaseCommand):
    help = "Create a demo user and the demo comparisons (prints the login and the URLs)."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--username", default="demo")
        parser.add_argument("--password", default="demo-blkreview")
        parser.add_argument("--queue", action="store_true",
                            help="queue the analysis for the worker instead of running it here")

    def handle(self, *args: Any, **opts: Any) -> None:
        User = get_user_model()
        user, created = User.objects.get_or_create(username=opts["username"])
        if created or not user.check_password(opts["password"]):
            user.set_password(opts["password"])
            user.save()
        comparisons = []
        for demo in DEMOS:
            comparison = (Comparison.objects.filter(patch__title=demo["title"], created_by=user)
                          .order_by("pk").first())
            if comparison is None:
                with transaction.atomic():
                    comparison, _ = submission_create(
                        title=demo["title"], version="", author=demo["author"],
                        baseline_files=demo["baseline"](), patched_files=demo["patched"](),
                        baseline_kernel=demo["baseline_kernel"],
                        patched_kernel=demo["patched_kernel"], stack=demo["stack"],
                        workload=demo["workload"], policy=demo["policy"], user=user)
            comparisons.append(comparison)
        if not opts["queue"]:
            for comparison in comparisons:
                self._run_here(comparison)
        series = self._series(user, run_here=not opts["queue"])
        lines = [f"Demo comparison: /comparisons/{c.pk}/  ({c.patch.title})" for c in comparisons]
        if series is not None:
            lines.append(f"Demo series (three versions): /series/{series.pk}/")
            fixing = series.patches.filter(position=2).first()
            if fixing is not None:
                lines.append(f"Fixes:-aware pairing (baseline offered): /upload/?patch={fixing.pk}")
        self.stdout.write(self.style.SUCCESS(
            "\n".join(lines)
            + f"\nDemo login: user {opts['username']!r}, password {opts['password']!r}"))

    def _run_here(self, comparison: Comparison) -> None:
        """Analyze both sides and run the comparison step in this process (what the tasks do)."""
        from reviewapp.models import ComparisonResult
        from reviewapp.services.jobs import comparison_refresh_status
        from reviewapp.tasks import run_analysis, run_compare

        bundles = list(comparison.baseline_bundles.all()) + list(comparison.patched_bundles.all())
        for bundle in bundles:
            if BundleResult.objects.filter(bundle=bundle).exists():
                continue
            job = (AnalysisJob.objects.filter(bundle=bundle)
                   .exclude(state__in=c.JOB_FINAL_STATES).order_by("-pk").first())
            if job is not None:
                state = run_analysis(job.pk)
                self.stdout.write(f"analysis of bundle {bundle.pk}: {state}")
        # then the comparison step (compare, check, model panel, charts), here too
        comparison.refresh_from_db()
        comparison_refresh_status(comparison=comparison)
        result = ComparisonResult.objects.filter(comparison=comparison).first()
        if result is not None and not result.is_final:
            state = run_compare(result.pk, task_id=result.celery_task_id)
            self.stdout.write(f"comparison {comparison.pk} step: {state}")

    def _series(self, user: Any, *, run_here: bool) -> Any:
        """The three-version series, its comparisons, threads, verdicts and checks (once)."""
        from reviewapp.models import Series
        from reviewapp.services.checks import check_create
        from reviewapp.services.series import series_create_from_mail

        existing = Series.objects.filter(submitted_by=user, version=3,
                                         stem__startswith="block: submit split bio").first()
        if existing is not None:
            return existing
        User = get_user_model()
        reviewer, created = User.objects.get_or_create(
            username="reviewer", defaults={"first_name": "Rita", "last_name": "Reviewer",
                                           "email": "reviewer@example.org"})
        if created:
            reviewer.set_password("demo-blkreview")
            reviewer.save()
        versions, cmps = [], []
        for v in (1, 2, 3):
            data = (DEMO_DIR / "series" / f"series_split_head_v{v}.mbox").read_bytes()
            with transaction.atomic():
                versions.append(series_create_from_mail(data=data, user=user))
        after = "seed000_after.blkparse.txt"
        for v, s in zip((1, 2, 3), versions, strict=True):
            patch = s.patches.get(position=2)
            patched = "seed000_before.blkparse.txt" if v == 1 else after
            with transaction.atomic():
                cmp, _ = submission_create(
                    patch=patch, baseline_files=[SimpleUploadedFile(
                        "before.blkparse.txt", (DEMO_DIR / "seed000_before.blkparse.txt")
                        .read_bytes(), "text/plain")],
                    patched_files=[SimpleUploadedFile(
                        f"v{v}.blkparse.txt", (DEMO_DIR / patched).read_bytes(), "text/plain")],
                    baseline_kernel="6.17", patched_kernel=f"6.17 + {s.version_tag or 'v1'}",
                    stack="md raid5 of 8 disks, 64k chunk (seed 000); trace of member 8,0",
                    workload="dd if=/dev/md0 of=/dev/null bs=4480k iflag=direct", user=user)
            if run_here:
                self._run_here(cmp)
            cmps.append(cmp)
            check_create(patch=patch, user=reviewer, context="ci-md-raid5",
                         state="fail" if v == 1 else "success",
                         description=("backward seeks unchanged" if v == 1 else
                                      "no backward seeks on the members"),
                         target_url="https://ci.example.org/blkreview-demo")
            self._threads(cmp, patch, user, reviewer, v)
        self._window_thread(cmps[1], reviewer)
        self._fixed_commit(user, cmps[0], run_here=run_here)
        from reviewapp.services.grants import grant_set

        # the Share panel of v3 shows a grant (the series is public; a private one would be
        # readable by the reviewer through it, its patches too)
        grant_set(obj=versions[-1], by=user, user=reviewer, level=c.GRANT_WRITE)
        from django.conf import settings
        from django.contrib.auth.models import Group

        if settings.BLKREVIEW_MAINTAINERS_GROUP:  # reviewer may set any patch's state
            group, _ = Group.objects.get_or_create(name=settings.BLKREVIEW_MAINTAINERS_GROUP)
            group.user_set.add(reviewer)
        return versions[-1]

    def _window_thread(self, cmp: Any, reviewer: Any) -> None:
        """A thread on a time window of v2's throughput chart (its link shades the window)."""
        import json

        from reviewapp.selectors import chart_payload
        from reviewapp.services.threads import thread_create

        text = chart_payload(comparison=cmp, section="throughput")
        charts = json.loads(text).get("charts", []) if text else []
        mbps = next((ch for ch in charts if ch.get("id") == "mbps"), None)
        panel = next((p for p in (mbps or {}).get("panels", [])
                      if p.get("side") == c.ROLE_PATCHED and p.get("figure")), None)
        xs = [x for t in (panel or {}).get("figure", {}).get("data", []) for x in t.get("x") or []]
        if len(xs) < 2:
            return  # charts not computed yet (--queue): no window to point at
        lo, hi = min(xs), max(xs)
        thread_create(user=reviewer, comparison=cmp, anchor_kind=c.ANCHOR_CHART,
                      anchor={"section": "throughput", "dev": json.loads(text).get("dev", ""),
                              "chart": "mbps", "side": c.ROLE_PATCHED,
                              "x0": lo + (hi - lo) * 0.25, "x1": lo + (hi - lo) * 0.5},
                      body="Throughput in this window: is the dip the remainder being requeued?")

    def _fixed_commit(self, user: Any, v1_cmp: Any, *, run_here: bool) -> None:
        """Fixes:-aware pairing: the series' patch 2 says ``Fixes: d89d87965dcb ("When stacked
        block devices ...")``; a patch of that commit (same id and subject; illustration only)
        with a comparison whose patched runs (the kernel with the fixed commit: seed 000's
        unpatched trace) the upload form offers as the baseline of patch 2."""
        from reviewapp.models import Patch
        from reviewapp.services.comparisons import comparison_create

        title = ("When stacked block devices are in-use (e.g. md or dm), the recursive calls")
        fixed = Patch.objects.create(
            title=title, author="NeilBrown <neilb@suse.com>",
            commit="d89d87965dcb", submitted_by=user,  # the 12 digits the tag gives
            body="illustration: the commit series_split_head's Fixes: tag names")
        cmp = comparison_create(patch=fixed, baseline=list(v1_cmp.baseline_bundles.all()),
                                patched=list(v1_cmp.baseline_bundles.all()), user=user)
        if run_here:
            self._run_here(cmp)

    def _threads(self, cmp: Any, patch: Any, user: Any, reviewer: Any, v: int) -> None:
        import json

        from reviewapp.models import ComparisonChart
        from reviewapp.selectors import chart_payload
        from reviewapp.services.threads import comment_create, thread_create, thread_set_resolved
        from reviewapp.services.verdicts import verdict_set

        chart = ComparisonChart.objects.filter(comparison=cmp, section="ordering").order_by(
            "pk").first()
        text = chart_payload(comparison=cmp, section="ordering", dev=chart.dev,
                             stage=chart.stage) if chart is not None else None
        if v == 1:
            thread_create(user=reviewer, comparison=cmp,
                          body="v1 leaves the member disks' order as it was: the zero-seek "
                               "share does not move. Is the remainder still queued at the tail?")
            return
        if chart is not None and text and v == 2:
            rows = [r for t in json.loads(text).get("tables", [])
                    for r in t.get("rows", []) if r]
            row = next((r for r in rows if str(r[0]).startswith("Backward dispatches")),
                       rows[0] if rows else None)
            if row is not None:
                t = thread_create(
                    user=reviewer, comparison=cmp, anchor_kind=c.ANCHOR_METRIC,
                    anchor={"section": "ordering", "dev": chart.dev, "stage": chart.stage,
                            "metric": str(row[0])},
                    body="This is the number that matters: the member sees its requests in "
                         "order again.\n\n```\n  8,0  G  R 2048 + 8\n```")
                comment_create(user=user, thread=t, body="Yes - v2 puts the remainder at the "
                                                         "head. @reviewer thanks for testing.")
                thread_set_resolved(thread=t, user=user, resolved=True)
        if v == 3:
            thread_create(user=reviewer, patch=patch, anchor_kind=c.ANCHOR_DIFF,
                          anchor={"line": 12}, body="Nit: say *why* the remainder goes first.")
            verdict_set(user=reviewer, patch=patch, kind=c.VERDICT_TESTED,
                        message="md raid5, 8 disks, dd 4480k O_DIRECT")
            verdict_set(user=reviewer, patch=patch, kind=c.VERDICT_REVIEWED)
