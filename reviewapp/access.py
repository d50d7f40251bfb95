"""Who may read and who may change what: the one access policy of blkreview.

Every page, section JSON, report, chart payload and API route asks this module, never a model
field directly. The rules:

* **Comparison** - readable by anyone when ``public``; else by its creator, staff, and the
  users and groups it is shared with (:class:`~reviewapp.models.AccessGrant`, read or write).
  Changeable (add runs, thresholds, sharing) by its creator, staff and write grants.
* **Series / Patch** - readable by anyone when ``public``; else by the submitter, staff, the
  users and groups it is shared with, and (a patch) whoever can read a comparison of it.
  Changeable by the submitter, staff and write grants. A grant on a series reaches its
  patches at the same level (read, or read and change); the comparisons of those patches are
  shared on their own. **Maintainers** (members of ``settings.BLKREVIEW_MAINTAINERS_GROUP``,
  as Patchwork's project maintainers) may also set the review state of any patch they can
  read, and change nothing else of it.
* **TraceBundle / BundleResult / AnalysisJob** - readable by the bundle's uploader, staff, and
  whoever can read a comparison that contains the bundle. A job or result is readable when its
  bundle is.
* **Thread / Comment** - readable when their comparison is; whoever can read a comparison may
  comment on it (logged in).
* **Usable** (to build a new comparison from, or to add to one): one's own bundles and
  patches, write-granted patches, public patches, and bundles already public (in a public
  comparison). A bundle shared with you through
  a private comparison is readable but not usable: using it would publish it.

Anything a user may not read is **404**, exactly as if it did not exist (never 403, which tells
that it exists). 403 is only for an object the user can read but not change.

The ``*_readable_by`` / ``*_usable_by`` functions return querysets (for lists and id lookups);
``*_for_reader`` / ``*_for_writer`` fetch one object or raise; ``can_*`` answer for one object.
Anonymous users are ``AnonymousUser`` (or None).
"""

from __future__ import annotations

from typing import Any

from django.contrib.contenttypes.models import ContentType
from django.core.exceptions import PermissionDenied
from django.db.models import Model, Q, QuerySet
from django.http import Http404

from reviewapp import constants as c
from reviewapp.models import (
    AccessGrant,
    AnalysisJob,
    BundleResult,
    Comparison,
    Patch,
    Series,
    Thread,
    TraceBundle,
)


def is_user(user: Any) -> bool:
    """A logged-in, active user (not anonymous, not None)."""
    return bool(getattr(user, "is_authenticated", False)) and getattr(user, "is_active", True)


def is_staff(user: Any) -> bool:
    return is_user(user) and bool(getattr(user, "is_staff", False))


# --- grants --------------------------------------------------------------------------------

def grants_of(user: Any, model: type[Model], *, write: bool = False) -> QuerySet[AccessGrant]:
    """The grants on objects of ``model`` that reach ``user`` (directly or through a group);
    ``write``: only those that allow changing. Empty for anonymous users."""
    if not is_user(user):
        return AccessGrant.objects.none()
    qs = AccessGrant.objects.filter(
        Q(user=user) | Q(group__in=user.groups.all()),
        content_type=ContentType.objects.get_for_model(model),
    )
    if write:
        qs = qs.filter(level=c.GRANT_WRITE)
    return qs


def granted_ids(user: Any, model: type[Model], *, write: bool = False) -> QuerySet[Any]:
    """Subquery of the ids of ``model`` objects granted to ``user``."""
    return grants_of(user, model, write=write).values("object_id")


def grant_level(user: Any, obj: Model) -> str | None:
    """``"write"``, ``"read"`` or None: the strongest grant ``user`` has on ``obj``."""
    levels = set(grants_of(user, type(obj)).filter(object_id=obj.pk)
                 .values_list("level", flat=True))
    if c.GRANT_WRITE in levels:
        return c.GRANT_WRITE
    return c.GRANT_READ if levels else None


def grants_on(obj: Model) -> QuerySet[AccessGrant]:
    """Every grant on ``obj`` (for its sharing panel), users and groups loaded."""
    return AccessGrant.objects.filter(
        content_type=ContentType.objects.get_for_model(type(obj)), object_id=obj.pk,
    ).select_related("user", "group")


# --- sharing -------------------------------------------------------------------------------

#: The field naming the owner of each shareable model (who may share it).
OWNER_FIELDS: dict[type[Model], str] = {
    Comparison: "created_by_id", Patch: "submitted_by_id", Series: "submitted_by_id",
}


def owner_id_of(obj: Model) -> Any:
    return getattr(obj, OWNER_FIELDS[type(obj)])


def can_share(user: Any, obj: Model) -> bool:
    """Only the owner (and staff) of a shareable object change its visibility and grants; a
    write grant lets one change the object, not who else may see it."""
    if type(obj) not in OWNER_FIELDS:
        return False
    if is_staff(user):
        return True
    return is_user(user) and owner_id_of(obj) == user.pk


def for_sharer(obj: Model, user: Any) -> Model:
    """``obj`` (already fetched through a ``*_for_reader``) if ``user`` may share it, else
    PermissionDenied (403)."""
    if not can_share(user, obj):
        raise PermissionDenied("only the owner may change who can see this")
    return obj


# --- comparisons ---------------------------------------------------------------------------

def comparisons_readable_by(user: Any) -> QuerySet[Comparison]:
    """Every comparison ``user`` may read: public ones, own, shared, or all for staff."""
    qs = Comparison.objects.all()
    if is_staff(user):
        return qs
    if not is_user(user):
        return qs.filter(public=True)
    return qs.filter(Q(public=True) | Q(created_by=user)
                     | Q(pk__in=granted_ids(user, Comparison)))


def comparisons_changeable_by(user: Any) -> QuerySet[Comparison]:
    """Every comparison ``user`` may change: own, write grants, or all for staff."""
    qs = Comparison.objects.all()
    if is_staff(user):
        return qs
    if not is_user(user):
        return qs.none()
    return qs.filter(Q(created_by=user) | Q(pk__in=granted_ids(user, Comparison, write=True)))


def can_read_comparison(user: Any, comparison: Comparison) -> bool:
    if comparison.public or is_staff(user):
        return True
    if not is_user(user):
        return False
    return comparison.created_by_id == user.pk or grant_level(user, comparison) is not None


def can_change_comparison(user: Any, comparison: Comparison) -> bool:
    if is_staff(user):
        return True
    if not is_user(user):
        return False
    return comparison.created_by_id == user.pk or grant_level(user, comparison) == c.GRANT_WRITE


def comparison_for_reader(*, pk: Any, user: Any) -> Comparison:
    """The comparison ``pk`` if ``user`` may read it, else Http404 (whether or not it exists)."""
    comparison = Comparison.objects.select_related("patch", "created_by").filter(pk=pk).first()
    if comparison is None or not can_read_comparison(user, comparison):
        raise Http404("no such comparison")
    return comparison


def comparison_for_writer(*, pk: Any, user: Any) -> Comparison:
    """The comparison ``pk`` if ``user`` may change it.

    Raises:
        Http404: ``user`` may not read it (or it does not exist).
        PermissionDenied: ``user`` may read it but not change it (403; the API answers it as
            JSON, pages with the 403 page).
    """
    comparison = comparison_for_reader(pk=pk, user=user)
    if not can_change_comparison(user, comparison):
        raise PermissionDenied("only the comparison's owner and the users it is shared with for "
                         "changes may change it")
    return comparison


# --- patches -------------------------------------------------------------------------------

def patches_readable_by(user: Any) -> QuerySet[Patch]:
    """Public, own, granted, and those of a comparison ``user`` may read (all for staff)."""
    qs = Patch.objects.all()
    if is_staff(user):
        return qs
    cond = Q(public=True) | Q(pk__in=comparisons_readable_by(user).values("patch_id"))
    if is_user(user):
        cond |= (Q(submitted_by=user) | Q(pk__in=granted_ids(user, Patch))
                 | Q(series__in=granted_ids(user, Series)))
    return qs.filter(cond)


def patches_usable_by(user: Any) -> QuerySet[Patch]:
    """Patches ``user`` may make a new comparison of: own, write-granted (the patch or its
    series), or public.

    A private patch readable only through a shared comparison is not usable: a public
    comparison of it would publish it.
    """
    if not is_user(user):
        return Patch.objects.none()
    return Patch.objects.filter(
        Q(submitted_by=user) | Q(pk__in=granted_ids(user, Patch, write=True)) | Q(public=True)
        | Q(series__in=granted_ids(user, Series, write=True)))


def can_read_patch(user: Any, patch: Patch) -> bool:
    return patches_readable_by(user).filter(pk=patch.pk).exists()


def can_change_patch(user: Any, patch: Patch) -> bool:
    if is_staff(user):
        return True
    if not is_user(user):
        return False
    if patch.submitted_by_id == user.pk or grant_level(user, patch) == c.GRANT_WRITE:
        return True
    # a write grant on its series reaches the patch
    return patch.series_id is not None and grants_of(user, Series, write=True).filter(
        object_id=patch.series_id).exists()


def is_maintainer(user: Any) -> bool:
    """A member of ``settings.BLKREVIEW_MAINTAINERS_GROUP`` (Patchwork's maintainer role)."""
    from django.conf import settings

    group = getattr(settings, "BLKREVIEW_MAINTAINERS_GROUP", "")
    return bool(group) and is_user(user) and user.groups.filter(name=group).exists()


def can_set_patch_state(user: Any, patch: Patch) -> bool:
    """Whoever may change the patch, and maintainers for any patch they can read."""
    return can_change_patch(user, patch) or (is_maintainer(user) and can_read_patch(user, patch))


def patch_for_state_setter(*, pk: Any, user: Any) -> Patch:
    """The patch ``pk`` if ``user`` may set its state; Http404 if unreadable,
    PermissionDenied (403) if readable only."""
    patch = patch_for_reader(pk=pk, user=user)
    if not can_set_patch_state(user, patch):
        raise PermissionDenied("only the patch's submitter, the users it is shared with for "
                               "changes and maintainers may change its state")
    return patch


def patch_for_reader(*, pk: Any, user: Any) -> Patch:
    """The patch ``pk`` if ``user`` may read it, else Http404."""
    patch = patches_readable_by(user).filter(pk=pk).first()
    if patch is None:
        raise Http404("no such patch")
    return patch


def patch_for_writer(*, pk: Any, user: Any) -> Patch:
    """The patch ``pk`` if ``user`` may change it; Http404 if unreadable, PermissionDenied (403) if
    readable only."""
    patch = patch_for_reader(pk=pk, user=user)
    if not can_change_patch(user, patch):
        raise PermissionDenied("only the patch's submitter and the users it is shared with for "
                         "changes may change it")
    return patch


# --- series --------------------------------------------------------------------------------

def series_readable_by(user: Any) -> QuerySet[Series]:
    """Public, own and shared series (all for staff)."""
    qs = Series.objects.all()
    if is_staff(user):
        return qs
    if not is_user(user):
        return qs.filter(public=True)
    return qs.filter(Q(public=True) | Q(submitted_by=user) | Q(pk__in=granted_ids(user, Series)))


def can_change_series(user: Any, series: Series) -> bool:
    if is_staff(user):
        return True
    if not is_user(user):
        return False
    return series.submitted_by_id == user.pk or grant_level(user, series) == c.GRANT_WRITE


def series_for_reader(*, pk: Any, user: Any) -> Series:
    """The series ``pk`` if ``user`` may read it, else Http404."""
    series = series_readable_by(user).filter(pk=pk).first()
    if series is None:
        raise Http404("no such series")
    return series


def series_for_writer(*, pk: Any, user: Any) -> Series:
    """The series ``pk`` if ``user`` may change it; Http404 if unreadable, PermissionDenied (403) if
    readable only."""
    series = series_for_reader(pk=pk, user=user)
    if not can_change_series(user, series):
        raise PermissionDenied("only the series' submitter and the users it is shared with for "
                         "changes may change it")
    return series


# --- bundles, results, jobs ----------------------------------------------------------------

def _bundle_ids_in(comparisons: QuerySet[Comparison]) -> Q:
    base = Comparison.baseline_bundles.through.objects.filter(comparison__in=comparisons)
    patched = Comparison.patched_bundles.through.objects.filter(comparison__in=comparisons)
    return (Q(pk__in=base.values("tracebundle_id"))
            | Q(pk__in=patched.values("tracebundle_id")))


def bundles_readable_by(user: Any) -> QuerySet[TraceBundle]:
    """Own bundles and those of a comparison ``user`` may read (all for staff)."""
    qs = TraceBundle.objects.all()
    if is_staff(user):
        return qs
    cond = _bundle_ids_in(comparisons_readable_by(user).values("pk"))
    if is_user(user):
        cond |= Q(uploaded_by=user)
    return qs.filter(cond)


def bundles_usable_by(user: Any) -> QuerySet[TraceBundle]:
    """Bundles ``user`` may put in a comparison: own ones and already public ones.

    A bundle readable only through a private comparison shared with ``user`` is not usable:
    putting it in a public comparison would publish it.
    """
    if not is_user(user):
        return TraceBundle.objects.none()
    return TraceBundle.objects.filter(
        Q(uploaded_by=user) | _bundle_ids_in(Comparison.objects.filter(public=True).values("pk")))


def bundle_for_reader(*, pk: Any, user: Any) -> TraceBundle:
    """The bundle ``pk`` if ``user`` may read it, else Http404."""
    bundle = bundles_readable_by(user).filter(pk=pk).first()
    if bundle is None:
        raise Http404("no such bundle")
    return bundle


def bundle_results_readable_by(user: Any) -> QuerySet[BundleResult]:
    return BundleResult.objects.filter(bundle__in=bundles_readable_by(user).values("pk"))


def jobs_readable_by(user: Any) -> QuerySet[AnalysisJob]:
    """Jobs of the bundles ``user`` may read."""
    return AnalysisJob.objects.filter(bundle__in=bundles_readable_by(user).values("pk"))


def job_for_reader(*, pk: Any, user: Any) -> AnalysisJob:
    """The job ``pk`` if ``user`` may read its bundle, else Http404."""
    job = jobs_readable_by(user).filter(pk=pk).first()
    if job is None:
        raise Http404("no such job")
    return job


# --- threads -------------------------------------------------------------------------------

def threads_readable_by(user: Any) -> QuerySet[Thread]:
    """Threads of a comparison, or (diff-line and patch threads) of a patch, ``user`` may read."""
    return Thread.objects.filter(Q(comparison__in=comparisons_readable_by(user).values("pk"))
                                 | Q(comparison__isnull=True,
                                     patch__in=patches_readable_by(user).values("pk")))


def thread_for_reader(*, pk: Any, user: Any) -> Thread:
    """The thread ``pk`` if ``user`` may read its comparison (or patch), else Http404."""
    thread = threads_readable_by(user).filter(pk=pk).first()
    if thread is None:
        raise Http404("no such thread")
    return thread


def can_comment(user: Any, comparison: Comparison) -> bool:
    """Any logged-in user who can read the comparison may take part in its discussion."""
    return is_user(user) and can_read_comparison(user, comparison)
