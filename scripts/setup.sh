#!/usr/bin/env bash
# Install everything blkreview needs on a fresh Debian machine: the virtualenv with the project
# and its dev dependencies, and (when run as root) the Debian packages the tests use:
# blktrace (the blkparse reference), qemu + mmdebstrap + cpio + kmod (the trace lab), chromium (browser tests through Playwright) and
# docker-compose (to validate docker-compose.yml; no Docker engine is needed).
# Idempotent: a second run only checks.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
WITH_DEV=${WITH_DEV:-1}

need_apt=()
command -v blkparse >/dev/null 2>&1 || need_apt+=(blktrace)
# the trace lab (workers/lab, tests/engine/lab): qemu, the guest root builder, cpio, depmod
command -v qemu-system-x86_64 >/dev/null 2>&1 || need_apt+=(qemu-system-x86)
command -v qemu-img >/dev/null 2>&1 || need_apt+=(qemu-utils)
command -v mmdebstrap >/dev/null 2>&1 || need_apt+=(mmdebstrap)
command -v cpio >/dev/null 2>&1 || need_apt+=(cpio)
command -v depmod >/dev/null 2>&1 || [ -x /usr/sbin/depmod ] || [ -x /sbin/depmod ] || need_apt+=(kmod)
[ -x /bin/busybox ] || [ -x /usr/bin/busybox ] || need_apt+=(busybox-static)
if [ "$WITH_DEV" = 1 ]; then
  # the test suite talks to a real PostgreSQL and Redis on 127.0.0.1
  command -v pg_ctlcluster >/dev/null 2>&1 || need_apt+=(postgresql)
  command -v redis-server >/dev/null 2>&1 || need_apt+=(redis-server)
  [ -x /usr/bin/chromium ] || need_apt+=(chromium)
  command -v docker-compose >/dev/null 2>&1 || need_apt+=(docker-compose)
fi
if [ ${#need_apt[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "setup: installing Debian packages: ${need_apt[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q >/dev/null
    apt-get install -y -q "${need_apt[@]}" >/dev/null
  else
    echo "setup: please install the Debian packages: ${need_apt[*]} (needs root); continuing" >&2
  fi
fi

# A freshly installed PostgreSQL only lets local users in by peer/password; the tests connect
# over TCP as postgres without a password (trust), as on the CI machines.
if [ "$WITH_DEV" = 1 ] && [ "$(id -u)" = 0 ] && command -v pg_ctlcluster >/dev/null 2>&1; then
  for hba in /etc/postgresql/*/main/pg_hba.conf; do
    [ -f "$hba" ] || continue
    if ! grep -qE '^host\s+all\s+all\s+127\.0\.0\.1/32\s+trust' "$hba"; then
      echo "setup: allowing trust auth for 127.0.0.1 in $hba (test database)"
      sed -i '1i host all all 127.0.0.1/32 trust\nhost all all ::1/128 trust' "$hba"
      ver=$(basename "$(dirname "$(dirname "$hba")")")
      pg_ctlcluster --skip-systemctl-redirect "$ver" main reload >/dev/null 2>&1 || true
    fi
  done
fi

if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv"
  "$PYTHON" -m venv .venv
fi
# Exactly the versions CI tested: the lock files (make lock) with their sha256 hashes, then the
# project itself without dependencies. The stamp holds the lock's checksum, so any change of
# the lock (a new dependency, a refresh) reinstalls; pyproject.toml changes reinstall the project.
if [ "$WITH_DEV" = 1 ]; then lock=requirements-dev.lock; else lock=requirements.lock; fi
stamp=.venv/.blkreview-installed
want="$(sha256sum "$lock" pyproject.toml | sha256sum | cut -d' ' -f1) $lock"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  echo "setup: installing Python packages into .venv from $lock"
  .venv/bin/python -m pip install -q --require-hashes -r "$lock"
  .venv/bin/python -m pip install -q --no-deps -e .
  if ! .venv/bin/python -m pip check >/dev/null 2>&1; then
    # pyproject.toml gained a dependency the lock does not have yet: install it so that this
    # machine works, and say so (tests/test_lock.py fails until `make lock` is run).
    echo "setup: WARNING: $lock is older than pyproject.toml; run 'make lock'" >&2
    .venv/bin/python -m pip install -q -e ".$( [ "$WITH_DEV" = 1 ] && echo '[dev]' )"
  fi
  echo "$want" > "$stamp"
fi
echo "setup: ok"
