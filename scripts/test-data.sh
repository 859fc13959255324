#!/usr/bin/env bash
# The Iceberg tables Petrel's tests read, each generated once per test run and shared by every
# test process (read-only: a test that writes copies the table first).
#
#   scripts/test-data.sh NAME...     # makes each dataset if needed; prints one path per NAME
#
# Datasets:
#   corpus             the fixture corpus (Spark, the Iceberg Java API, PyIceberg and a fork, with
#                      Spark's results): $PETREL_CORPUS, else ../shared/fixtures/iceberg-corpus beside
#                      the clone, else generated with scripts/corpus/make_corpus.py
#   pyiceberg-tables   PyIceberg tables of every type and transform (table-provider/tests/pyiceberg/gen_tables.py)
#   pyiceberg-deletes  merge-on-read tables with hand-written delete files (gen_deletes.py)
#   spark-tables       Spark/Java/PyIceberg tables of scripts/corpus/petrel_tables.py: percent-encoded
#                      partition paths, NaN and signed zeros, the differential predicates with Spark's
#                      answers. Two copies: `origin 50%/` (read where it was written: its path holds
#                      a space and a '%') and `moved/` (every path in the metadata points elsewhere);
#                      and, in the same Spark session, `corpus-s3/`: the corpus relocated to
#                      s3://petrel-corpus/corpus/ by Iceberg's rewrite_table_path, staged with the
#                      list of files to copy (scripts/corpus/relocate_corpus.py)
#
# Where: $PETREL_TEST_DATA (scripts/test.sh points it at a directory the run owns and removes),
# else <repo>/target/petrel-test-data (kept between runs; a dataset whose generator changed is
# made again). Each dataset is made under a lock, so concurrent test processes wait for the first
# one instead of generating it again, and is complete once its `.complete` file exists (it holds
# the generator's fingerprint).
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
root="${PETREL_TEST_DATA:-$repo/target/petrel-test-data}"
mkdir -p "$root"
root="$(cd "$root" && pwd)"

python_venv() {
    local py="${PETREL_PYTHON:-$repo/.venv/bin/python}"
    if [[ ! -x "$py" ]]; then
        bash "$repo/scripts/setup-python.sh" >&2
    fi
    echo "$py"
}

# The files whose content decides a dataset's content.
generator_files() {
    case "$1" in
        pyiceberg-tables) echo "$repo/table-provider/tests/pyiceberg/gen_tables.py" ;;
        pyiceberg-deletes) echo "$repo/table-provider/tests/pyiceberg/gen_deletes.py" ;;
        spark-tables)
            echo "$repo/scripts/corpus/petrel_tables.py $repo/scripts/corpus/make_corpus.py" \
                "$repo/scripts/corpus/relocate_corpus.py $repo/scripts/corpus/OriginFileSystem.java" \
                "$(dataset corpus)/index.json"
            ;;
        corpus) echo "$repo/scripts/corpus/make_corpus.py" ;;
        *) echo "test-data: unknown dataset '$1'" >&2; return 2 ;;
    esac
}

generate() {
    local name="$1" out="$2"
    # The JVM's scratch files go where the rest of the run's do (no /tmp/hsperfdata_*).
    export JAVA_TOOL_OPTIONS="-Djava.io.tmpdir=${TMPDIR:-/tmp} -XX:-UsePerfData"
    case "$name" in
        pyiceberg-tables) "$(python_venv)" "$repo/table-provider/tests/pyiceberg/gen_tables.py" "$out" ;;
        pyiceberg-deletes) "$(python_venv)" "$repo/table-provider/tests/pyiceberg/gen_deletes.py" "$out" ;;
        spark-tables)
            bash "$repo/scripts/setup-spark.sh" >&2
            PETREL_RELOCATE_CORPUS="$(dataset corpus)" PETREL_RELOCATE_OUT="$out/corpus-s3" \
                python3 "$repo/scripts/corpus/petrel_tables.py" \
                --out "$out/moved" --origin "$out/origin 50%" --keep-origin
            ;;
        corpus)
            bash "$repo/scripts/setup-spark.sh" >&2
            python3 "$repo/scripts/corpus/make_corpus.py" --out "$out" --origin "$out.origin"
            ;;
    esac
}

dataset() {
    local name="$1"
    if [[ "$name" == corpus ]]; then
        if [[ -n "${PETREL_CORPUS:-}" ]]; then echo "$PETREL_CORPUS"; return; fi
        local shared
        shared="$(cd "$repo/.." && pwd)/shared/fixtures/iceberg-corpus"
        if [[ -f "$shared/index.json" ]]; then echo "$shared"; return; fi
    fi
    local files out="$root/$name" fingerprint
    files="$(generator_files "$name")"
    # shellcheck disable=SC2086  # a list of paths without spaces
    fingerprint="$(cat $files | sha256sum | cut -d' ' -f1)"
    (
        flock 9
        if [[ -f "$out/.complete" && "$(cat "$out/.complete")" == "$fingerprint" ]]; then
            exit 0
        fi
        rm -rf "$out" "$out.origin"
        mkdir -p "$out"
        started=$SECONDS
        echo "test-data: generating $name into $out" >&2
        if ! generate "$name" "$out" >"$root/$name.log" 2>&1; then
            echo "test-data: generating $name failed; its output ($root/$name.log):" >&2
            tail -n 60 "$root/$name.log" >&2
            exit 1
        fi
        echo "$fingerprint" > "$out/.complete"
        echo "test-data: $name ready in $((SECONDS - started)) s" >&2
    ) 9>"$root/.$name.lock"
    echo "$out"
}

if [[ $# -eq 0 ]]; then
    sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
    exit 2
fi
for name in "$@"; do
    dataset "$name"
done
