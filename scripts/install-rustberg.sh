#!/usr/bin/env bash
# Installs `rustberg` (a full Iceberg REST catalog server built on the same `iceberg` crate as
# Petrel) from crates.io into ~/.cache/petrel/tools/rustberg, for the REST catalog tests
# (table-provider/tests/it/rest_catalog.rs). The build takes ~20 minutes on 2 cores, so it is
# cached per machine: nothing happens when the binary is already there. It builds in its own
# target directory under ~/.cache/petrel so it never touches the workspace's target/.
# It is built with the `aws-credentials` feature (STS AssumeRole credential vending, which the
# vended-credentials tests use against moto's STS); a binary cached without it (no stamp file)
# is rebuilt once.
# Prints the binary's path on stdout.
set -euo pipefail

version="${RUSTBERG_VERSION:-}"
features="aws-credentials"
root="${PETREL_TOOLS_DIR:-$HOME/.cache/petrel/tools}/rustberg"
bin="$root/bin/rustberg"
stamp="$root/features"
if [ -x "$bin" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$features" ]; then
    echo "$bin"
    exit 0
fi

mkdir -p "$root"
echo "installing rustberg${version:+ $version} into $root (cached; ~20 min on 2 cores)" >&2
version_args=()
if [ -n "$version" ]; then
    version_args=(--version "$version")
fi
CARGO_TARGET_DIR="$HOME/.cache/petrel/rustberg-target" \
    cargo install --locked --force rustberg "${version_args[@]}" --features "$features" \
    --root "$root" >&2
echo "$features" >"$stamp"
rm -rf "$HOME/.cache/petrel/rustberg-target"
echo "$bin"
