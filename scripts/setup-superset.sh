#!/usr/bin/env bash
# Install Apache Superset 6.1 (PyPI) with a Flight SQL SQLAlchemy dialect into its OWN virtualenv,
# cached per machine: ~/.cache/petrel/superset-venv (override with PETREL_SUPERSET_VENV).
#
# Superset pins SQLAlchemy 1.4 and many Flask packages, so it cannot share the project's .venv
# (SQLAlchemy 2 for PyIceberg). server/tests/python/test_superset.py runs the `superset` CLI of
# this venv (metadata database, admin, web server) and talks to it over its REST API.
#
# Superset has no engine spec for that dialect: client-examples/superset (Petrel's, with the
# time grains) is installed too.
#
# The dialect is flightsql-dbapi (`datafusion+flightsql://host:port`): a DB-API driver on
# pyarrow.flight with a SQLAlchemy 1.4 dialect. `rich` and flask-caching 2.3.1 are what
# `superset db upgrade` needs but Superset 6.1's wheel does not pin; `cachetools` is what its
# engine specs import (without it no database can be added).
#
# It also makes Superset's SQLite metadata database once (`superset db upgrade`, `superset fab
# create-admin` admin/admin, `superset init`) as $venv/petrel-metadata-template.db, which the
# test copies (those three commands take ~1 min on 2 cores).
#
# Idempotent: a stamp file records the finished install of exactly these pins.
set -euo pipefail

venv="${PETREL_SUPERSET_VENV:-$HOME/.cache/petrel/superset-venv}"
stamp="$venv/.petrel-superset.stamp"
pins=(
  "apache-superset==6.1.*"
  "flightsql-dbapi==0.2.*"
  "rich"
  "flask-caching==2.3.1"
  "cachetools"
)

if [[ -n "${PETREL_PYTHON:-}" ]]; then
  py="$PETREL_PYTHON"
elif command -v python3.11 >/dev/null 2>&1; then
  py="$(command -v python3.11)"
else
  py="$(command -v python3)"
fi
# Petrel's engine spec for Superset (client-examples/superset), installed from the checkout.
spec="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/client-examples/superset"
want="$( { printf '%s\n' "${pins[@]}"; cat "${BASH_SOURCE[0]}" "$spec/pyproject.toml" "$spec/petrel_superset.py";
          "$py" -c 'import sys; print(sys.version.split()[0])'; } | sha256sum | cut -d' ' -f1)"

if [[ -x "$venv/bin/superset" && -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
  echo "setup-superset: $venv is up to date"
  exit 0
fi

if [[ -x "$venv/bin/python" ]] && "$venv/bin/python" -c '' 2>/dev/null; then
  echo "setup-superset: refreshing packages in $venv"
else
  echo "setup-superset: creating $venv with $py ($("$py" --version 2>&1))"
  rm -rf "$venv"
  mkdir -p "$(dirname "$venv")"
  "$py" -m venv "$venv"
fi
rm -f "$stamp"
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1 PIP_ROOT_USER_ACTION=ignore
"$venv/bin/python" -m pip install --quiet "${pins[@]}"
# Built from a copy, so that the checkout gets no build/ or egg-info directories.
build="$(mktemp -d)"
trap 'rm -rf "$build"' EXIT
cp "$spec/pyproject.toml" "$spec/petrel_superset.py" "$build/"
"$venv/bin/python" -m pip install --quiet --force-reinstall --no-deps "$build"
"$venv/bin/python" - <<'PY'
import importlib.metadata as m
for p in ("apache-superset", "flightsql-dbapi", "sqlalchemy", "pyarrow", "flask-caching"):
    print(f"setup-superset:   {p}=={m.version(p)}")
import superset, flightsql.sqlalchemy, cachetools, petrel_superset  # noqa: F401  (imports work)
PY
# Superset's metadata database, made once per install (`superset db upgrade` alone takes ~30 s):
# the Superset test copies it. Users: admin / admin.
template="$venv/petrel-metadata-template.db"
rm -f "$template"
cat > "$build/superset_config.py" <<PY
SECRET_KEY = "petrel-superset-template"
SQLALCHEMY_DATABASE_URI = "sqlite:///$template"
PY
(
  export SUPERSET_CONFIG_PATH="$build/superset_config.py" SUPERSET_HOME="$build" FLASK_APP=superset
  "$venv/bin/superset" db upgrade >"$build/upgrade.log" 2>&1 || { cat "$build/upgrade.log" >&2; exit 1; }
  "$venv/bin/superset" fab create-admin --username admin --firstname Petrel --lastname Test \
    --email admin@example.com --password admin >"$build/admin.log" 2>&1 \
    || { cat "$build/admin.log" >&2; exit 1; }
  "$venv/bin/superset" init >"$build/init.log" 2>&1 || { cat "$build/init.log" >&2; exit 1; }
)
echo "setup-superset: metadata database template $template"
echo "$want" > "$stamp"
echo "setup-superset: done ($venv)"
