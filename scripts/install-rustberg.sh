#!/usr/bin/env bash
# Installs `rustberg` (a full Iceberg REST catalog server built on the same `iceberg` crate as
# Petrel) from crates.io into ~/.cache/petrel/tools/rustberg, for the REST catalog tests
# (table-provider/tests/it/rest_catalog.rs). The build takes ~20 minutes on 2 cores, so it is
# cached per machine: nothing happens when the binary is already there. It builds in its own
# target directory under ~/.cache/petrel so it never touches the workspace's target/.
# Prints the binary's path on stdout.
set -euo pipefail

version="${RUSTBERG_VERSION:-}"
root="${PETREL_TOOLS_DIR:-$HOME/.cache/petrel/tools}/rustberg"
bin="$root/bin/rustberg"
if [ -x "$bin" ]; then
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
    cargo install --locked rustberg "${version_args[@]}" --root "$root" >&2
rm -rf "$HOME/.cache/petrel/rustberg-target"
echo "$bin"
