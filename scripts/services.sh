#!/usr/bin/env bash
# Make sure the PostgreSQL and Redis the tests talk to are reachable on 127.0.0.1; start the
# machine's own servers when they are not (Debian's postgresql and redis-server packages,
# installed by scripts/setup.sh when missing).
set -uo pipefail

PGHOST=${PGHOST:-127.0.0.1}
PGPORT=${PGPORT:-5432}
REDIS_PORT=${REDIS_PORT:-6379}

port_open() { (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null; }

wait_port() {  # host port name
  for _ in $(seq 1 60); do port_open "$1" "$2" && return 0; sleep 0.5; done
  echo "services: $3 did not come up on $1:$2" >&2
  return 1
}

if ! port_open "$PGHOST" "$PGPORT"; then
  echo "services: starting PostgreSQL"
  if command -v pg_ctlcluster >/dev/null 2>&1; then
    pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -n1)" main start || true
  fi
  wait_port "$PGHOST" "$PGPORT" PostgreSQL || exit 1
fi

if ! port_open 127.0.0.1 "$REDIS_PORT"; then
  echo "services: starting Redis"
  redis-server --daemonize yes --bind 127.0.0.1 --port "$REDIS_PORT" --save "" --appendonly no || true
  wait_port 127.0.0.1 "$REDIS_PORT" Redis || exit 1
fi
echo "services: PostgreSQL $PGHOST:$PGPORT and Redis 127.0.0.1:$REDIS_PORT are up"
