"""OpenAPI extensions (imported by reviewapp.api.urls so drf-spectacular registers them)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.extensions import OpenApiAuthenticationExtension


class ApiTokenScheme(OpenApiAuthenticationExtension):
    target_class = "reviewapp.api.auth.ApiTokenAuthentication"
    name = "tokenAuth"

    def get_security_definition(self, auto_schema: Any) -> dict[str, Any]:
        return {"type": "apiKey", "in": "header", "name": "Authorization",
                "description": "Token-based authentication: `Token <key>`"}


def add_auth_errors(result: dict[str, Any], generator: Any, request: Any,
                    public: bool) -> dict[str, Any]:
    """Postprocessing hook: every operation may answer 401 (a bad, revoked or expired token)
    and 403 (a token without the scope the request needs, reviewapp.api.permissions), with the
    one error shape; document both wherever the view did not."""
    schemas = result.get("components", {}).get("schemas", {})
    if "Error" not in schemas:
        return result
    ref = {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}
    for ops in result.get("paths", {}).values():
        for op in ops.values():
            if not isinstance(op, dict) or "responses" not in op:
                continue
            for status, what in (("401", "invalid, revoked or expired token"),
                                 ("403", "the token lacks the scope this request needs, or "
                                         "you may read but not change this object")):
                op["responses"].setdefault(status, {**ref, "description": what})
    return result
