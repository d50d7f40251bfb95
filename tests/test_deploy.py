"""The deployment files say what they promise: compose runs the full stack, CI runs the tests."""

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent


def test_compose_has_the_full_stack_with_health_checks():
    """docker-compose.yml defines web, worker, postgres and redis, each with a health check."""
    spec = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    services = spec["services"]
    assert {"web", "worker", "postgres", "redis"} <= set(services)
    for name in ("web", "worker", "postgres", "redis"):
        assert "healthcheck" in services[name], name
    assert "gunicorn" in services["web"]["command"]
    assert "celery" in services["worker"]["command"]
    assert {"pgdata", "media"} <= set(spec["volumes"])
    assert services["web"]["environment"]["DATABASE_URL"].startswith("postgres://")


@pytest.mark.skipif(shutil.which("docker-compose") is None, reason="docker-compose not installed")
def test_compose_config_is_accepted_by_docker_compose():
    """Debian's docker-compose accepts the file as it is (`docker-compose config -q`)."""
    result = subprocess.run(["docker-compose", "config", "-q"], cwd=ROOT,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr


def test_ci_runs_the_readme_test_command():
    """.ci/run calls the test command the README tells a new user to run."""
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    assert "make test" in readme
    assert "make demo" in readme
    assert "make test" in ci
