"""Limit/offset pagination of every list of the API: ``{"count", "next", "previous",
"results"}``, ``?limit=`` (default 50, at most 200), ``?offset=``.

The next and previous pages are also in an RFC 8288 ``Link`` header (``rel="next"`` /
``rel="prev"``), as Patchwork's API sends them, so a client can follow pages without reading
the body. ``tests/web/api/test_pagination.py`` walks every list route of the schema.
"""

from __future__ import annotations

from typing import Any

from rest_framework.pagination import LimitOffsetPagination
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView


class Pagination(LimitOffsetPagination):
    default_limit = 50
    max_limit = 200

    def get_paginated_response(self, data: Any) -> Response:
        response = super().get_paginated_response(data)
        links = [f'<{url}>; rel="{rel}"' for url, rel in ((self.get_next_link(), "next"),
                                                          (self.get_previous_link(), "prev"))
                 if url]
        if links:
            response["Link"] = ", ".join(links)
        return response

    def get_paginated_response_schema(self, schema: dict[str, Any]) -> dict[str, Any]:
        """DRF's shape written for OpenAPI 3.1 (null is a type, not ``nullable``)."""
        link = {"type": ["string", "null"], "format": "uri"}
        return {"type": "object", "required": ["count", "results"],
                "properties": {"count": {"type": "integer", "example": 123},
                               "next": link, "previous": link, "results": schema}}


def paginated(view: APIView, request: Request, items: Any, serialize: Any) -> Response:
    """One page of ``items`` (a queryset or a list) as the paginated envelope; ``serialize``
    turns the page's items into their JSON. For list views that are not ``ListAPIView``s
    (their items are not one queryset); the view sets ``pagination_class = Pagination`` so
    the schema shows the envelope too."""
    paginator = Pagination()
    page = paginator.paginate_queryset(items, request, view=view)
    return paginator.get_paginated_response(serialize(page if page is not None else items))
