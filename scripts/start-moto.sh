#!/usr/bin/env bash
# Starts moto's S3 server (moto[server] from scripts/requirements.txt, in the project's .venv) on
# 127.0.0.1 and creates buckets, for trying `petrel serve --warehouse s3://...` by hand and for
# the S3 benchmark. The Rust tests start their own server (tests/it/common/moto.rs).
#
#   scripts/start-moto.sh [PORT] [BUCKET...]     # default port 9090, bucket "warehouse"
#
# Prints the environment that reaches it (any key pair is accepted; requests must be signed),
# then runs the server in the foreground until interrupted:
#
#   export AWS_ENDPOINT_URL=http://127.0.0.1:9090 AWS_ACCESS_KEY_ID=test \
#          AWS_SECRET_ACCESS_KEY=test AWS_REGION=us-east-1 AWS_ALLOW_HTTP=true
#   petrel serve --warehouse s3://warehouse/prefix
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${PETREL_VENV:-$repo/.venv}"
port="${1:-9090}"
shift || true
buckets=("$@")
[[ ${#buckets[@]} -eq 0 ]] && buckets=(warehouse)

bash "$repo/scripts/setup-python.sh" >&2
"$venv/bin/moto_server" -H 127.0.0.1 -p "$port" &
pid=$!
trap 'kill "$pid" 2>/dev/null || true' EXIT INT TERM
for _ in $(seq 1 300); do
    if "$venv/bin/python" -c "import socket,sys; socket.create_connection(('127.0.0.1', int(sys.argv[1])), 1)" "$port" 2>/dev/null; then
        break
    fi
    sleep 0.1
done
export AWS_ENDPOINT_URL="http://127.0.0.1:$port" AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test \
    AWS_REGION=us-east-1
for b in "${buckets[@]}"; do
    "$venv/bin/python" -c "import sys, boto3; boto3.client('s3', endpoint_url=sys.argv[1]).create_bucket(Bucket=sys.argv[2])" \
        "$AWS_ENDPOINT_URL" "$b"
done
cat <<ENV
export AWS_ENDPOINT_URL=$AWS_ENDPOINT_URL AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test AWS_REGION=us-east-1 AWS_ALLOW_HTTP=true
ENV
wait "$pid"
