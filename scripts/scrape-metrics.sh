#!/usr/bin/env bash
# Scrapes a running Petrel's Prometheus endpoint (started with --metrics-addr ADDR) and prints
# Petrel's series (no HELP/TYPE lines). Usage: scripts/scrape-metrics.sh [ADDR]  (default
# 127.0.0.1:9464); e.g. `scripts/scrape-metrics.sh | grep petrel_queries_total`.
set -euo pipefail
addr="${1:-127.0.0.1:9464}"
curl -fsS "http://${addr}/metrics" | grep '^petrel_'
