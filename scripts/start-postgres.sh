#!/usr/bin/env bash
# Starts a throwaway PostgreSQL 15 server for Petrel's tests (the SQL catalog on PostgreSQL)
# and prints its URI, postgresql://petrel:petrel@127.0.0.1:PORT/petrel, on stdout.
#
#   scripts/start-postgres.sh DIR PORT     start a server whose files live in DIR (created;
#                                          data in DIR/data, log DIR/postgres.log, socket in DIR)
#   scripts/start-postgres.sh --stop DIR   stop it (fast shutdown)
#
# It listens on 127.0.0.1:PORT only; user `petrel` (password `petrel`, scram-sha-256 over TCP)
# owns database `petrel` and may create more. Durability is off (fsync, synchronous_commit,
# full_page_writes): a test server, not a place to keep data. Debian's PostgreSQL 15 is
# installed with apt-get when /usr/lib/postgresql/15/bin is missing. The initialised cluster is cached once per machine in
# ~/.cache/petrel/postgres15-template and copied, which keeps a start near half a second.
# initdb and the server never run as root: under root they run as the `postgres` user.
set -euo pipefail

PG_BIN="${PETREL_PG_BIN:-/usr/lib/postgresql/15/bin}"
TEMPLATE="${PETREL_CACHE:-$HOME/.cache/petrel}/postgres15-template"

as_server_user() {
    if [ "$(id -u)" = 0 ]; then
        runuser -u postgres -- "$@"
    else
        "$@"
    fi
}

if [ "${1:-}" = "--stop" ]; then
    dir="${2:?usage: $0 --stop DIR}"
    as_server_user "$PG_BIN/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null
    exit 0
fi

dir="${1:?usage: $0 DIR PORT}"
port="${2:?usage: $0 DIR PORT}"

if [ ! -x "$PG_BIN/initdb" ]; then
    echo "PostgreSQL 15 is missing ($PG_BIN); installing Debian's postgresql-15" >&2
    sudo_cmd=()
    [ "$(id -u)" = 0 ] || sudo_cmd=(sudo)
    "${sudo_cmd[@]}" apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq postgresql-15 >&2
fi

server_user="$(id -un)"
[ "$(id -u)" = 0 ] && server_user=postgres

# One initialised cluster per machine (superuser `postgres`; trust on the socket only).
if [ ! -f "$TEMPLATE/PG_VERSION" ]; then
    # initdb runs where the server user can reach, then is copied: directly under /tmp, not
    # under $TMPDIR (scripts/test.sh points it into a run directory only root may enter) nor
    # under root's home.
    staging="$(mktemp -d /tmp/petrel-pg-template.XXXXXX)"
    chmod 755 "$staging"
    chown "$server_user" "$staging"
    as_server_user "$PG_BIN/initdb" -D "$staging/data" -U postgres --auth-local=trust \
        --auth-host=scram-sha-256 --no-sync -E UTF8 --locale=C.UTF-8 >"$staging/initdb.log" 2>&1 || {
        cat "$staging/initdb.log" >&2
        rm -rf "$staging"
        exit 1
    }
    mkdir -p "$(dirname "$TEMPLATE")"
    partial="$(mktemp -d "$TEMPLATE.XXXXXX")"
    cp -a "$staging/data/." "$partial/"
    # Another run may have won the race: keep theirs.
    mv -T "$partial" "$TEMPLATE" 2>/dev/null || rm -rf "$partial"
    rm -rf "$staging"
fi

mkdir -p "$dir/data"
chmod 755 "$dir"
cp -a "$TEMPLATE/." "$dir/data/"
chown -R "$server_user" "$dir"
chmod 700 "$dir/data"
touch "$dir/postgres.log"
chown "$server_user" "$dir/postgres.log"

as_server_user "$PG_BIN/pg_ctl" -D "$dir/data" -l "$dir/postgres.log" -w -t 30 \
    -o "-p $port -c listen_addresses=127.0.0.1 -k $dir -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200" \
    start >/dev/null || {
    tail -n 20 "$dir/postgres.log" >&2
    exit 1
}

psql=("$PG_BIN/psql" -X -q -v ON_ERROR_STOP=1 -h "$dir" -p "$port" -U postgres -d postgres)
"${psql[@]}" -c "CREATE ROLE petrel LOGIN CREATEDB PASSWORD 'petrel'" >&2
"${psql[@]}" -c "CREATE DATABASE petrel OWNER petrel" >&2
echo "postgresql://petrel:petrel@127.0.0.1:$port/petrel"
