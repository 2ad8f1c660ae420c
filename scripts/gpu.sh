#!/usr/bin/env bash
# GPU checks of backing/cuda, in two halves:
#   scripts/gpu.sh build        on a machine with Go: CGO_ENABLED=0 (no cgo; dynamically linked to libc only)
#                               binaries into .devbin/ (purego loads libcuda at run time)
#   scripts/gpu.sh run OUTDIR   on the GPU machine (no Go needed, only the NVIDIA
#                               driver): GPU tests -> OUTDIR/gpu-tests.log,
#                               measurements -> OUTDIR/gpu.json and OUTDIR/gpu.md
# Each step runs under timeout and a failure does not stop the next; the
# whole run stays under 3 minutes.
set -u
cd "$(dirname "$0")/.."
case "${1:-}" in
build)
	set -e
	export CGO_ENABLED=0 GOOS=linux GOARCH="${GOARCH:-amd64}"
	mkdir -p .devbin
	go build -o .devbin/locus-cuda ./cmd/locus-cuda
	go test -c -o .devbin/cuda.test ./backing/cuda
	echo "built: $(ls .devbin | tr '\n' ' ')"
	;;
run)
	out="${2:?usage: scripts/gpu.sh run OUTDIR}"
	mkdir -p "$out"
	nvidia-smi 2>&1 | head -20 || echo "nvidia-smi failed"
	# Tests run from their package directory (testdata, relative paths).
	(cd backing/cuda && timeout 70 ../../.devbin/cuda.test -test.v -test.timeout 65s) >"$out/gpu-tests.log" 2>&1
	echo "cuda.test exit $?" >>"$out/gpu-tests.log"
	timeout 100 .devbin/locus-cuda -budget 80s -o "$out/gpu.json" 2>"$out/gpu-measure.log"
	echo "locus-cuda exit $?" >>"$out/gpu-measure.log"
	.devbin/locus-cuda report "$out/gpu.json" 2>>"$out/gpu-measure.log"
	grep -E '^(--- |=== RUN|ok|FAIL|PASS)|SKIP|skip' "$out/gpu-tests.log" | grep -v '=== RUN' | tail -40
	tail -n 5 "$out/gpu-measure.log"
	;;
*)
	echo "usage: scripts/gpu.sh build | run OUTDIR" >&2
	exit 2
	;;
esac
