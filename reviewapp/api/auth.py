"""Token authentication for the API (kept free of view imports: DRF loads it from settings)."""

from __future__ import annotations

from typing import Any

from rest_framework import exceptions
from rest_framework.authentication import BaseAuthentication, get_authorization_header
from rest_framework.request import Request

from reviewapp.services.tokens import TokenRejected, token_authenticate


class ApiTokenAuthentication(BaseAuthentication):
    """``Authorization: Token <key>`` (or ``Bearer <key>``) with a key from the tokens page."""

    keywords = (b"token", b"bearer")

    def authenticate(self, request: Request) -> tuple[Any, Any] | None:
        auth = get_authorization_header(request).split()
        if not auth or auth[0].lower() not in self.keywords:
            return None
        from reviewapp.api.throttles import bad_token_seen

        if len(auth) != 2:
            bad_token_seen(request)
            raise exceptions.AuthenticationFailed("Authorization header must be 'Token <key>'")
        try:
            key = auth[1].decode()
        except UnicodeError as exc:
            bad_token_seen(request)
            raise exceptions.AuthenticationFailed("invalid token") from exc
        try:
            token = token_authenticate(key=key)
        except TokenRejected as exc:
            bad_token_seen(request)
            raise exceptions.AuthenticationFailed(exc.reason) from exc
        if token is None:
            # guessing tokens: failures are counted per client IP (429 past the budget)
            bad_token_seen(request)
            raise exceptions.AuthenticationFailed("invalid token")
        return token.user, token

    def authenticate_header(self, request: Request) -> str:
        return "Token"
