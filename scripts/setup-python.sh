#!/usr/bin/env bash
# Create (or refresh) the Python virtualenv that Petrel's tests use: <repo>/.venv with the pinned
# packages of scripts/requirements.txt (PyIceberg, pyarrow, ADBC Flight SQL driver, pytest).
#
# Idempotent: a stamp file (.venv/.petrel-requirements.sha256, the SHA-256 of requirements.txt and
# the interpreter version) records a finished install; when it matches, the script does nothing.
# Non-interactive, works as root (CI). Needs CPython 3.11 (or python3) with the venv module and
# network access to PyPI on the first run.
#
#   scripts/setup-python.sh            # install / check
#   PETREL_PYTHON=/usr/bin/python3.11 scripts/setup-python.sh
#   PETREL_VENV=/some/dir scripts/setup-python.sh
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
reqs="$repo/scripts/requirements.txt"
venv="${PETREL_VENV:-$repo/.venv}"
stamp="$venv/.petrel-requirements.sha256"

if [[ -n "${PETREL_PYTHON:-}" ]]; then
  py="$PETREL_PYTHON"
elif command -v python3.11 >/dev/null 2>&1; then
  py="$(command -v python3.11)"
elif command -v python3 >/dev/null 2>&1; then
  py="$(command -v python3)"
else
  echo "setup-python: no python3.11 or python3 on PATH (set PETREL_PYTHON)" >&2
  exit 1
fi
if ! "$py" -c 'import sys; sys.exit(sys.version_info < (3, 10))'; then
  echo "setup-python: $py is $("$py" --version 2>&1); Python >= 3.10 is needed (3.11 is what CI uses)" >&2
  exit 1
fi

want="$( { sha256sum "$reqs" | cut -d' ' -f1; "$py" -c 'import sys; print(sys.version.split()[0])'; } | sha256sum | cut -d' ' -f1)"

if [[ -x "$venv/bin/python" && -f "$stamp" && "$(cat "$stamp")" == "$want" ]] && "$venv/bin/python" -c '' 2>/dev/null; then
  echo "setup-python: $venv is up to date ($(basename "$reqs") unchanged)"
  exit 0
fi

if [[ -x "$venv/bin/python" ]] && "$venv/bin/python" -c '' 2>/dev/null; then
  echo "setup-python: refreshing packages in existing virtualenv $venv"
else
  if [[ -e "$venv" && ! -f "$venv/pyvenv.cfg" && -n "$(ls -A "$venv" 2>/dev/null)" ]]; then
    echo "setup-python: $venv exists and is not a virtualenv; not touching it" >&2
    exit 1
  fi
  echo "setup-python: creating virtualenv $venv with $py ($("$py" --version 2>&1))"
  rm -rf "$venv"
  "$py" -m venv "$venv"
fi
rm -f "$stamp"

export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1 PIP_ROOT_USER_ACTION=ignore
echo "setup-python: pip install -r $reqs"
"$venv/bin/python" -m pip install --quiet -r "$reqs"
"$venv/bin/python" -m pip check
"$venv/bin/python" - <<'PY'
import importlib.metadata as m
for p in ("pyiceberg", "pyiceberg-core", "pyarrow", "sqlalchemy", "adbc-driver-flightsql", "adbc-driver-manager", "pytest"):
    print(f"setup-python:   {p}=={m.version(p)}")
import pyiceberg.catalog.sql, pyarrow.parquet, adbc_driver_flightsql.dbapi  # noqa: F401  (imports work)
PY
echo "$want" > "$stamp"
echo "setup-python: done ($venv)"
