"""The deployment files say what they promise: compose runs the full stack, CI runs the tests."""

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent


def test_compose_has_the_full_stack_with_health_checks():
    """docker-compose.yml defines web, worker, postgres, redis and seaweedfs, each with a
    health check; web and worker store media in SeaweedFS's bucket, not in a shared volume."""
    spec = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    services = spec["services"]
    assert {"web", "worker", "postgres", "redis", "seaweedfs"} <= set(services)
    for name in ("web", "worker", "postgres", "redis", "seaweedfs"):
        assert "healthcheck" in services[name], name
    assert "gunicorn" in services["web"]["command"]
    assert "celery" in services["worker"]["command"]
    assert {"pgdata", "seaweedfs"} <= set(spec["volumes"])
    assert services["seaweedfs"]["image"].startswith("chrislusf/seaweedfs")
    for name in ("web", "worker"):
        env = services[name]["environment"]
        assert env["STORAGE_URL"].startswith("s3+http://") and "@seaweedfs:8333/" in env["STORAGE_URL"]
        assert "volumes" not in services[name], name  # no shared filesystem
    assert "init_storage" in services["web"]["command"]
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


def test_compose_gives_each_container_its_own_metrics_directory():
    """Prometheus multiprocess mode in every app container: PROMETHEUS_MULTIPROC_DIR on a tmpfs
    of that container (never a shared volume), and gunicorn started with the hooks that mark
    exited workers dead (reviewapp/gunicorn_conf.py), here and in the Dockerfile."""
    spec = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    for name, svc in spec["services"].items():
        if "celery" not in str(svc.get("command")) and "gunicorn" not in str(svc.get("command")):
            continue
        path = svc["environment"]["PROMETHEUS_MULTIPROC_DIR"]
        assert any(str(t).split(":")[0] == path for t in svc.get("tmpfs", [])), name
        assert "volumes" not in svc, name
    assert "-c python:reviewapp.gunicorn_conf" in spec["services"]["web"]["command"]
    assert '"-c", "python:reviewapp.gunicorn_conf"' in (ROOT / "Dockerfile").read_text()


def test_compose_workers_consume_every_routed_queue_as_documented():
    """Every queue a task is routed to (reviewapp/settings.py, default names) is consumed by
    compose's default `worker`; the `pools` profile's workers take replay and notify; and
    docs/deploy.md's list of the worker's queues is the compose default (it once named only
    analysis and celery, so replay and notify tasks would have looked unserved)."""
    import re

    from django.conf import settings

    services = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]
    default = re.search(r"-Q \$\{WORKER_QUEUES:-([\w,]+)\}", services["worker"]["command"])
    assert default, services["worker"]["command"]
    consumed = default.group(1).split(",")
    routed = {"analysis", "replay", "notify", settings.CELERY_TASK_DEFAULT_QUEUE}
    defaults = {"BLKREVIEW_ANALYSIS_QUEUE": "analysis", "BLKREVIEW_REPLAY_QUEUE": "replay",
                "BLKREVIEW_NOTIFY_QUEUE": "notify"}
    settings_text = (ROOT / "reviewapp" / "settings.py").read_text()
    for name, value in defaults.items():  # the tests rename the queues; the defaults are these
        assert f'os.environ.get("{name}", "{value}")' in settings_text, name
    assert set(consumed) == routed
    assert re.search(r"-Q replay\b", services["worker-replay"]["command"])
    assert re.search(r"-Q notify\b", services["worker-notify"]["command"])
    assert {"pools"} == set(services["worker-replay"]["profiles"]) == set(
        services["worker-notify"]["profiles"])
    deploy = (ROOT / "docs" / "deploy.md").read_text()
    line = re.search(r"`worker` \(Celery, queues ([^;)]+)", deploy)
    assert line, "docs/deploy.md no longer lists the worker's queues"
    assert set(re.findall(r"`(\w+)`", line.group(1))) == set(consumed)
