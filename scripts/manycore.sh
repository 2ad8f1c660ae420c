#!/usr/bin/env bash
# The many-core sweep (issue "the safe pool wins on every machine and on
# many cores"): the scaling runs at 1 to 16 workers and the scoreboard, on a
# machine with 16 or more CPUs. It needs no Go there:
#
#   scripts/manycore.sh build          here: builds .devbin/locus-eval (CGO_ENABLED=0)
#   scripts/manycore.sh run OUTDIR     there: writes OUTDIR/scale.json, OUTDIR/run.json and OUTDIR/tiers.json
#
# Then, here: go run ./cmd/locus-eval report RUN.json ... OUTDIR/scale.json
# adds the generated "many cores" section to BENCHMARKS.md. The whole run
# takes under 6 minutes on 16 cores.
set -euo pipefail
cd "$(dirname "$0")/.."

case "${1:-}" in
build)
	mkdir -p .devbin
	CGO_ENABLED=0 go build -o .devbin/locus-eval ./cmd/locus-eval
	;;
run)
	out=${2:?usage: scripts/manycore.sh run OUTDIR}
	mkdir -p "$out"
	bin=.devbin/locus-eval
	nproc
	lscpu | head -30 || true
	# Scaling first: it is what only a many-core machine can show.
	timeout 150 "$bin" scale -runs 10 -json -q >"$out/scale.json" 2>"$out/manycore.err" || echo "scale: exit $?"
	"$bin" report -text "$out/scale.json" 2>&1 | tail -70 || true
	timeout 150 "$bin" -runs 8 -json -q >"$out/run.json" 2>>"$out/manycore.err" || echo "scoreboard: exit $?"
	"$bin" report -text "$out/run.json" 2>&1 | grep -A16 '^Targets' || true
	# The offload tiers on this machine's memory and disk.
	timeout 90 "$bin" tiers -json -q >"$out/tiers.json" 2>>"$out/manycore.err" || echo "tiers: exit $?"
	;;
*)
	echo "usage: scripts/manycore.sh build | run OUTDIR" >&2
	exit 2
	;;
esac
