"""Every API test checks its responses against the OpenAPI schema the code generates."""

from __future__ import annotations

from typing import Any

import jsonschema
import pytest


@pytest.fixture(scope="session")
def openapi() -> dict[str, Any]:
    from drf_spectacular.generators import SchemaGenerator

    return SchemaGenerator().get_schema(request=None, public=True)


@pytest.fixture
def check(openapi):
    """``check(response, "post", "/api/v1/bundles/")`` -> the JSON body, validated.

    Fails when the status code is not documented for the operation, or the body does not
    match the documented schema.
    """

    def _check(response: Any, method: str, path: str) -> Any:
        op = openapi["paths"].get(path, {}).get(method.lower())
        assert op is not None, f"{method.upper()} {path} is not in the schema"
        status = str(response.status_code)
        assert status in op["responses"], (
            f"{method.upper()} {path} answered {status}, documented: {sorted(op['responses'])}: "
            f"{getattr(response, 'content', b'')[:500]!r}")
        body = response.json()
        content = op["responses"][status].get("content", {})
        schema = content.get("application/json", {}).get("schema")
        assert schema is not None, f"no JSON schema for {status} of {method.upper()} {path}"
        root = dict(schema)
        root["components"] = openapi["components"]
        jsonschema.Draft202012Validator(root).validate(body)
        return body

    return _check
