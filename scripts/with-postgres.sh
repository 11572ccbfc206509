#!/usr/bin/env bash
# Runs a command with TEST_DATABASE_URL naming a Postgres server that tests
# may create and drop databases on:
#
#   1. TEST_DATABASE_URL, when set;
#   2. else DATABASE_URL, when it is a postgres:// URL;
#   3. else the server on 127.0.0.1:5432, when one answers (trust auth, user postgres);
#   4. else a throwaway cluster started with this machine's initdb/pg_ctl in a
#      temporary folder, stopped and removed when the command ends.
#
# usage: scripts/with-postgres.sh COMMAND [ARGS...]
set -euo pipefail

answers() { psql "$1" -XtAq -c 'SELECT 1' >/dev/null 2>&1; }

if [ -n "${TEST_DATABASE_URL:-}" ]; then
  echo "with-postgres: using TEST_DATABASE_URL" >&2
elif [[ "${DATABASE_URL:-}" == postgres* ]]; then
  echo "with-postgres: using DATABASE_URL" >&2
  export TEST_DATABASE_URL="$DATABASE_URL"
elif answers "postgres://postgres@127.0.0.1:5432/postgres"; then
  echo "with-postgres: using the server on 127.0.0.1:5432" >&2
  export TEST_DATABASE_URL="postgres://postgres@127.0.0.1:5432/postgres"
else
  bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
  if [ -z "$bin" ] || [ ! -x "$bin/initdb" ]; then
    echo "with-postgres: no Postgres server answers and no initdb is installed; installing Debian's postgresql" >&2
    sudo=""; [ "$(id -u)" -eq 0 ] || sudo=sudo
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql
    bin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)
  fi
  dir=$(mktemp -d /tmp/idem-pg.XXXXXX)
  # initdb refuses to run as root: run the cluster as the postgres user then.
  run=()
  if [ "$(id -u)" -eq 0 ]; then
    id postgres >/dev/null 2>&1 || useradd --system --no-create-home postgres
    chown postgres "$dir"
    run=(runuser -u postgres --)
  fi
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  cleanup() {
    "${run[@]}" "$bin/pg_ctl" -D "$dir/data" -m immediate stop >/dev/null 2>&1 || true
    rm -rf "$dir"
  }
  trap cleanup EXIT
  echo "with-postgres: starting a throwaway cluster on 127.0.0.1:$port ($bin)" >&2
  "${run[@]}" "$bin/initdb" -D "$dir/data" -U postgres --auth=trust -E UTF8 --locale=C.UTF-8 >/dev/null
  "${run[@]}" "$bin/pg_ctl" -D "$dir/data" -l "$dir/log" -w \
    -o "-c listen_addresses=127.0.0.1 -p $port -k $dir -c fsync=off -c max_connections=200" start >/dev/null
  export TEST_DATABASE_URL="postgres://postgres@127.0.0.1:$port/postgres"
  "$@"
  exit $?
fi

exec "$@"
