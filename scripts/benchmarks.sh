#!/usr/bin/env bash
# Prints BENCHMARKS.md from the runs recorded under benchmarks/; it measures
# nothing. CI checks that BENCHMARKS.md is what this prints.
#
#   bash scripts/benchmarks.sh > BENCHMARKS.md
#
# The recorded runs, and the commands that made them:
#   dev-run.json, dev-thread.json   go run ./cmd/locus-eval -json, ... thread -json (the development machine)
#   h100-run.json, h100-scale.json  scripts/manycore.sh run (16 cores beside an H100)
#   h100-scale-repeat.json          an earlier scale run there (an earlier revision), for stability
#   h100-tiers.json, h100-adapters.json, h100-chat-sha256.json, h100-chat-xxhash.json, h100-fleet.json
#                                   locus-eval tiers -json -q, adapters -json -q, chat -json [-hash xxhash_cbor],
#                                   fleet -json there (16 cores beside the H100; no Redis there)
#   h100-scale-3.json               locus-eval scale -runs 10 -json there, at a later revision (not rendered:
#                                   a third stability check of h100-scale.json)
#   h100-gpu.json, h100-gpu-tests.log  scripts/gpu.sh run (the H100)
#   dev-tiers.json                  go run ./cmd/locus-eval tiers -json (the development machine)
#   dev-tiers-direct.json           go run ./cmd/locus-eval tiers -json -direct (the development machine)
#   dev-chat-sha256.json            go run ./cmd/locus-eval chat -json (the development machine)
#   dev-chat-xxhash.json            go run ./cmd/locus-eval chat -json -hash xxhash_cbor (the development machine)
#   dev-adapters.json               go run ./cmd/locus-eval adapters -json (the development machine)
#   dev-fleet.json                  go run ./cmd/locus-eval fleet -json -redis 127.0.0.1:7201,127.0.0.1:7202,127.0.0.1:7203 (engines as processes)
#                                   (the development machine, a local 3-master Redis Cluster)
set -euo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go run ./cmd/locus-cuda report benchmarks/h100-gpu.json >"$tmp/gpu.md"
go run ./cmd/locus-eval report -include "$tmp/gpu.md" \
	benchmarks/dev-run.json benchmarks/h100-run.json benchmarks/dev-thread.json benchmarks/h100-scale.json \
	benchmarks/dev-tiers.json benchmarks/dev-tiers-direct.json benchmarks/h100-tiers.json \
	benchmarks/dev-chat-sha256.json benchmarks/dev-chat-xxhash.json benchmarks/h100-chat-sha256.json benchmarks/h100-chat-xxhash.json \
	benchmarks/dev-adapters.json benchmarks/h100-adapters.json benchmarks/dev-fleet.json benchmarks/h100-fleet.json
