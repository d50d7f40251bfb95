"""Sharing: the owner of a comparison, patch or series makes it public or private and shares it
with named users and Django groups, to read or to change (AccessGrant rows).

The callers fetch the object through ``reviewapp.access.*_for_reader`` first (so an unreadable
object is 404) and these functions check that the caller may share it (owner or staff, else
NotAllowed, 403). What a grant allows is decided in :mod:`reviewapp.access`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.contrib.contenttypes.models import ContentType
from django.db import transaction
from django.db.models import Model

from reviewapp import access
from reviewapp import constants as c
from reviewapp.models import AccessGrant, Series
from reviewapp.services import NotAllowed, UploadRejected

LEVELS = tuple(level for level, _ in c.GRANT_LEVELS)


def _check_sharer(obj: Model, by: Any) -> None:
    if not access.can_share(by, obj):
        raise NotAllowed("only the owner may change who can see this")


def _clean_level(level: str) -> str:
    level = (level or c.GRANT_READ).strip().lower()
    if level not in LEVELS:
        raise UploadRejected(f"level must be one of {', '.join(LEVELS)}", field="level")
    return level


def grantee_find(*, user: str = "", group: str = "", name: str = "") -> tuple[Any, Any]:
    """``(user, None)`` or ``(None, group)`` for a user name, a group name, or ``name`` (a user
    name, or ``group:NAME``; a bare name that is no user but a group is that group).

    Raises:
        UploadRejected: no such user or group, or neither/both given.
    """
    User = get_user_model()
    if name:
        name = name.strip()
        if name.lower().startswith("group:"):
            group = name[6:].strip()
        else:
            found = User.objects.filter(username=name, is_active=True).first()
            if found is not None:
                return found, None
            group = name
    if user and group:
        raise UploadRejected("give a user or a group, not both", field="user")
    if user:
        found = User.objects.filter(username=user.strip(), is_active=True).first()
        if found is None:
            raise UploadRejected(f"no user named {user.strip()!r}", field="user")
        return found, None
    if group:
        g = Group.objects.filter(name=group.strip()).first()
        if g is None:
            raise UploadRejected(f"no user or group named {group.strip()!r}",
                                 field="name" if name else "group")
        return None, g
    raise UploadRejected("give the user or group to share with", field="name" if name else "user")


def grant_set(*, obj: Model, by: Any, level: str = c.GRANT_READ, user: Any = None,
              group: Any = None) -> AccessGrant:
    """Share ``obj`` with ``user`` or ``group`` at ``level`` (replacing an earlier level)."""
    _check_sharer(obj, by)
    level = _clean_level(level)
    if (user is None) == (group is None):
        raise UploadRejected("give a user or a group", field="name")
    if user is not None and user.pk == access.owner_id_of(obj):
        raise UploadRejected("the owner can always see and change it", field="name")
    grant, _ = AccessGrant.objects.update_or_create(
        content_type=ContentType.objects.get_for_model(type(obj)), object_id=obj.pk,
        user=user, group=group, defaults={"level": level, "granted_by": by})
    return grant


def grant_remove(*, obj: Model, by: Any, grant_id: int) -> None:
    """Stop sharing ``obj`` with one grantee (an unknown grant id is a 400)."""
    _check_sharer(obj, by)
    deleted, _ = access.grants_on(obj).filter(pk=grant_id).delete()
    if not deleted:
        raise UploadRejected(f"no grant with id {grant_id} on this", field="grant")


def visibility_set(*, obj: Model, by: Any, public: bool) -> Model:
    """Make ``obj`` public (anyone, no login) or private (owner and grants).

    A series takes its patches along (they were sent, and uploaded, together): a public series
    whose patch pages answer 404 would be a list of dead links, and a series made private
    should not leave its diffs public."""
    _check_sharer(obj, by)
    with transaction.atomic():
        if obj.public != public:  # type: ignore[attr-defined]
            obj.public = public  # type: ignore[attr-defined]
            obj.save(update_fields=["public"])
        if isinstance(obj, Series):
            obj.patches.exclude(public=public).update(public=public)
    return obj


def access_replace(*, obj: Model, by: Any, public: bool | None,
                   grants: Iterable[Mapping[str, Any]] | None) -> Model:
    """The API's PUT: set visibility (when given) and replace every grant (when given) in one
    transaction; each grant is ``{"user": name}`` or ``{"group": name}`` with ``level``."""
    _check_sharer(obj, by)
    with transaction.atomic():
        if public is not None:
            visibility_set(obj=obj, by=by, public=public)
        if grants is not None:
            wanted = []
            for entry in grants:
                u, g = grantee_find(user=str(entry.get("user") or ""),
                                    group=str(entry.get("group") or ""))
                wanted.append(grant_set(obj=obj, by=by, level=str(entry.get("level") or ""),
                                        user=u, group=g).pk)
            access.grants_on(obj).exclude(pk__in=wanted).delete()
    return obj


def grants_describe(obj: Model) -> list[dict[str, Any]]:
    """Each grant as ``{"id", "user" | "group", "level"}`` (the API's and page's shape)."""
    out = []
    for g in access.grants_on(obj).order_by("pk"):
        who = ({"user": g.user.get_username(), "group": None} if g.user_id
               else {"user": None, "group": g.group.name})
        out.append({"id": g.pk, **who, "level": g.level})
    return out
