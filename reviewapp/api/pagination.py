"""Limit/offset pagination of every list of the collaboration API:
``{"count", "next", "previous", "results"}``, ``?limit=`` (default 50, at most 200), ``?offset=``."""

from __future__ import annotations

from typing import Any

from rest_framework.pagination import LimitOffsetPagination


class Pagination(LimitOffsetPagination):
    default_limit = 50
    max_limit = 200

    def get_paginated_response_schema(self, schema: dict[str, Any]) -> dict[str, Any]:
        """DRF's shape written for OpenAPI 3.1 (null is a type, not ``nullable``)."""
        link = {"type": ["string", "null"], "format": "uri"}
        return {"type": "object", "required": ["count", "results"],
                "properties": {"count": {"type": "integer", "example": 123},
                               "next": link, "previous": link, "results": schema}}
