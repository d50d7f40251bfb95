"""Token scopes: what a request made with an API token may do.

A request authenticated by an :class:`~reviewapp.models.ApiToken` needs the scope of its
method: ``read`` for GET/HEAD/OPTIONS, ``upload`` for every other method, unless the view says
otherwise with ``token_scopes = {"POST": "check"}`` (a CI bot's token posting checks needs only
``check``). A missing scope is 403 JSON. Session (browser) requests are not limited by scopes.
``TokenScope`` is in DEFAULT_PERMISSION_CLASSES; a view that sets its own ``permission_classes``
must list it too (tests/web/test_access_walk.py checks every route with a read-only token).
"""

from __future__ import annotations

from typing import Any

from rest_framework.permissions import SAFE_METHODS, BasePermission
from rest_framework.request import Request

from reviewapp import constants as c
from reviewapp.models import ApiToken


def required_scope(request: Request, view: Any) -> str:
    """The scope ``request`` needs on ``view``."""
    scopes = getattr(view, "token_scopes", None) or {}
    if request.method in scopes:
        return str(scopes[request.method])
    return c.TOKEN_SCOPE_READ if request.method in SAFE_METHODS else c.TOKEN_SCOPE_UPLOAD


class TokenScope(BasePermission):
    """Refuses (403) a token request whose token lacks the scope the method needs."""

    message = "this token lacks the scope this request needs"

    def has_permission(self, request: Request, view: Any) -> bool:
        token = request.auth
        if not isinstance(token, ApiToken):
            return True
        needed = required_scope(request, view)
        if needed in (token.scopes or []):
            return True
        self.message = (f"this token lacks the {needed!r} scope (it has: "
                        f"{', '.join(token.scopes or []) or 'none'}); create one with it on "
                        "the API tokens page")
        return False
