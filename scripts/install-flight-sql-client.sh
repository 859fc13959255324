#!/usr/bin/env bash
# Installs arrow-rs's `flight_sql_client` CLI (arrow-flight 58.4.1, the version Petrel builds
# on) into ~/.cache/petrel/tools/flight_sql_client, for server/tests/python/
# test_flight_sql_client_cli.py. Cached per machine, outside the clone, so a CI run on a fresh
# clone does not build it again (~10 minutes of release build the first time on 2 cores; it is
# built with the dev profile, which compiles in about half that: the tests need its behaviour,
# not its speed). It builds in its own target directory and never touches the workspace's.
# Prints the binary's path on stdout.
set -euo pipefail

version="58.4.1"
features="cli flight-sql tls-ring"
root="${PETREL_TOOLS_DIR:-$HOME/.cache/petrel/tools}/flight_sql_client"
bin="$root/bin/flight_sql_client"
stamp="$root/installed"
if [ -x "$bin" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$version $features" ]; then
    echo "$bin"
    exit 0
fi

mkdir -p "$root"
echo "installing arrow-rs's flight_sql_client $version into $root (cached)" >&2
target="$(mktemp -d "$HOME/.cache/petrel/flight-sql-client-target.XXXXXX")"
trap 'rm -rf "$target"' EXIT
PATH="$root/bin:$PATH" CARGO_TARGET_DIR="$target" \
    cargo install --locked --debug --force --root "$root" arrow-flight --version "$version" \
    --features "$features" --bin flight_sql_client >&2
echo "$version $features" >"$stamp"
echo "$bin"
