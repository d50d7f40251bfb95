"""schemathesis against the live OpenAPI schema on a test server: every operation, generated
inputs (with a valid token), no 5xx and no response that violates the schema. Bounded: a few
examples per operation, no deadline, derandomized (about 5 minutes on a loaded 2-core machine)."""

from __future__ import annotations

import pytest

schemathesis = pytest.importorskip("schemathesis", minversion="4.0")
from hypothesis import HealthCheck, settings  # noqa: E402
from schemathesis.checks import not_a_server_error, response_schema_conformance  # noqa: E402

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(900),
              pytest.mark.django_db(transaction=True)]


@pytest.fixture
def live_schema(live_server, transactional_db):
    return schemathesis.openapi.from_url(f"{live_server.url}/api/v1/schema/?format=json")


schema = schemathesis.pytest.from_fixture("live_schema")


@schema.parametrize()
@settings(max_examples=4, deadline=None, derandomize=True,
          suppress_health_check=list(HealthCheck))
def test_api_conforms_to_its_schema(case, user, live_server):
    """No operation answers 5xx or a body its schema does not allow."""
    from reviewapp.services.tokens import token_create

    _, key = token_create(user=user, name="schemathesis")
    case.call_and_validate(base_url=live_server.url, headers={"Authorization": f"Token {key}"},
                           timeout=30, checks=[not_a_server_error, response_schema_conformance])
