#!/usr/bin/env bash
# Spark on S3: the jars Spark 3.5 + Iceberg 1.10 need to read and write s3:// and s3a:// tables
# (Hadoop's S3A file system; Iceberg's HadoopFileIO reaches S3 through it), beside the Spark setup
# of scripts/setup-spark.sh (run first). The Maven repositories are out of reach here; the PyPI
# source distribution of sagemaker-pyspark 1.4.5 ships both jars (hadoop-aws 3.3.1 and the AWS SDK
# bundle 1.11.901 it was built against), so they are taken from there: `pip download` of that one
# archive (181 MB, checked against its SHA-256), the two jars extracted and checked too. Spark's
# own Hadoop is 3.3.4; S3A 3.3.1 runs on it (tests/it/spark_on_s3.rs).
#
# Idempotent: when both jars are in place with the expected digests the script only prints their
# directory. The last line printed is always that directory:
#
#   scripts/setup-spark-s3.sh          # -> ${PETREL_CACHE:-$HOME/.cache/petrel}/corpus-venvs/s3-jars
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cache="${PETREL_CACHE:-$HOME/.cache/petrel}"
venvs="$cache/corpus-venvs"
jars="$venvs/s3-jars"
say() { echo "setup-spark-s3: $*" >&2; }

sdist=sagemaker_pyspark-1.4.5.tar.gz
sdist_sha=05ca2d5081d7138ce29a8fb0a9cba077f28c825288ed07aed46a82e63c0bf1fb
declare -A jar_sha=(
  [hadoop-aws-3.3.1.jar]=6be50ad8a8b445d2802381b085b2a3ede5c29d353450a6a21f16b2fefa962b6e
  [aws-java-sdk-bundle-1.11.901.jar]=b87175b32a16544cc1b37cf40390eb375833e62bed67f8ce6cde4b7ad6429ead
)

bash "$repo/scripts/setup-spark.sh" >&2

present() {
  local name
  for name in "${!jar_sha[@]}"; do
    [[ -f "$jars/$name" ]] || return 1
    [[ "$(sha256sum "$jars/$name" | cut -d' ' -f1)" == "${jar_sha[$name]}" ]] || return 1
  done
}

mkdir -p "$venvs"
exec 9>"$venvs/.petrel-setup-spark-s3.lock"
flock 9
if present; then
  say "hadoop-aws and the AWS SDK bundle are in $jars"
  echo "$jars"
  exit 0
fi

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
say "pip download sagemaker-pyspark==1.4.5 (its source archive ships hadoop-aws and the AWS SDK bundle)"
PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1 PIP_ROOT_USER_ACTION=ignore \
  "$venvs/spark/bin/python" -m pip download --quiet --no-deps --no-binary :all: \
  "sagemaker-pyspark==1.4.5" -d "$tmp" >&2
got="$(sha256sum "$tmp/$sdist" | cut -d' ' -f1)"
if [[ "$got" != "$sdist_sha" ]]; then
  say "$sdist has SHA-256 $got, expected $sdist_sha" && exit 1
fi
members=()
for name in "${!jar_sha[@]}"; do members+=("sagemaker_pyspark-1.4.5/deps/jars/$name"); done
tar -xzf "$tmp/$sdist" -C "$tmp" "${members[@]}"
mkdir -p "$jars"
for name in "${!jar_sha[@]}"; do
  got="$(sha256sum "$tmp/sagemaker_pyspark-1.4.5/deps/jars/$name" | cut -d' ' -f1)"
  if [[ "$got" != "${jar_sha[$name]}" ]]; then
    say "$name has SHA-256 $got, expected ${jar_sha[$name]}" && exit 1
  fi
  mv "$tmp/sagemaker_pyspark-1.4.5/deps/jars/$name" "$jars/$name.tmp"
  mv "$jars/$name.tmp" "$jars/$name"
done
say "installed hadoop-aws 3.3.1 and aws-java-sdk-bundle 1.11.901 in $jars"
echo "$jars"
