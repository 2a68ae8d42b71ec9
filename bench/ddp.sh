#!/bin/sh
# ddp.sh runs examples/ddp and PyTorch's DistributedDataParallel
# (bench/ddp/ddp_mlp.py, Debian's python3-torch with OpenBLAS) on the same
# model, in one run, taking turns: the 784-1024-1024-10 MLP, ReLU, SGD with
# momentum, batch 64 per rank, one thread per rank. For each side and each
# rank count it reports the median step time, the local step time (the
# same step with no gradient reduction: examples/ddp --local, a plain
# model in PyTorch), samples/s, the communication overhead per step (step
# minus local) and the scale factor T_n/(n·T_1) in samples/s; and, for
# gorun, the share of all-reduce time hidden behind backward.
#
#   bench/ddp.sh                     # make bench-ddp: np 1 and 2, 3 rounds
#   NPS="1 2 4 8 16" REPS=3 bench/ddp.sh
#   BUCKET_MB=1 bench/ddp.sh         # both sides with 1 MiB buckets (25: both defaults)
#
# Both sides take their ranks from gorun: PyTorch through the env://
# rendezvous (MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE), since Debian's
# torchrun fails on Python 3.11. The script stops if PyTorch did not map
# OpenBLAS (BLAS_CHECK=0 for a PyTorch with its own, such as pip's MKL
# builds). Each run takes STEPS steps (60); the
# first SKIP (10) are warm-up and left out of the medians.
set -eu
cd "$(dirname "$0")/.."
NPS=${NPS:-"1 2"}
REPS=${REPS:-3}
STEPS=${STEPS:-60}
SKIP=${SKIP:-10}
BUCKET_MB=${BUCKET_MB:-25}
PY=${PY:-/usr/bin/python3}
OUT=${OUT:-bench/out}
GORUN=${GORUN:-}
DDP=${DDP:-}
mkdir -p "$OUT"

if [ -z "${NO_INSTALL:-}" ] && ! { "$PY" -c 'import torch' 2>/dev/null && [ -e /usr/lib/x86_64-linux-gnu/openblas-pthread/libblas.so.3 ]; }; then
	echo "bench-ddp: installing python3-torch and libopenblas0-pthread" >&2
	apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-torch libopenblas0-pthread >/dev/null
fi
if [ -z "$GORUN" ]; then
	GORUN=$OUT/gorun DDP=$OUT/ddp
	go build -o "$GORUN" ./cmd/gorun
	go build -o "$DDP" ./examples/ddp
fi
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1

# median prints the median of the numbers on its input, one a line.
median() {
	sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print "nan"; else printf "%.3f\n", NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

# run SIDE MODE NP: one run; prints the median ms per step (and, for
# gorun's synced runs, the hidden share) as "ms hidden".
run() {
	side=$1 mode=$2 np=$3
	if [ "$side" = gorun ]; then
		set -- "$DDP" --steps "$STEPS" --batch $((64 * np)) --bucket-mb "$BUCKET_MB"
	else
		set -- "$PY" bench/ddp/ddp_mlp.py --steps "$STEPS" --batch 64 --bucket-mb "$BUCKET_MB"
	fi
	[ "$mode" = local ] && set -- "$@" --local
	"$GORUN" -np "$np" --timeout 10m -x OPENBLAS_NUM_THREADS -x OMP_NUM_THREADS "$@" >"$OUT/ddp.run" 2>"$OUT/ddp.err" || {
		echo "bench-ddp: $side $mode np $np failed:" >&2
		cat "$OUT/ddp.err" >&2
		exit 1
	}
	if [ "$side" = torch ] && [ "${BLAS_CHECK:-1}" = 1 ] && ! grep -q '^blas .*openblas' "$OUT/ddp.run"; then
		echo "bench-ddp: PyTorch does not use OpenBLAS: $(grep '^blas' "$OUT/ddp.run")" >&2
		exit 1
	fi
	hidden=$(awk '/hidden behind backward/ { h = $4 } END { print (h == "" ? "-" : h) }' "$OUT/ddp.run")
	awk -v skip="$SKIP" -v batch=$((64 * np)) '$1 == "step" && $2 > skip { print 1000 * batch / $6 }' "$OUT/ddp.run" |
		median | tr '\n' ' '
	echo "$hidden"
}

: >"$OUT/ddp.raw"
for np in $NPS; do
	for rep in $(seq "$REPS"); do
		for side in gorun torch; do
			for mode in sync local; do
				echo "$side $mode $np $rep $(run "$side" "$mode" "$np")" >>"$OUT/ddp.raw"
			done
		done
	done
done

# The table: medians over the rounds.
table() {
	printf "%-6s %3s %10s %10s %10s %12s %7s %8s\n" side np "step ms" "local ms" "comm ms" samples/s scale hidden
	for side in gorun torch; do
		t1=
		for np in $NPS; do
			s=$(awk -v k="$side sync $np" '$1 " " $2 " " $3 == k { print $5 }' "$OUT/ddp.raw" | median)
			l=$(awk -v k="$side local $np" '$1 " " $2 " " $3 == k { print $5 }' "$OUT/ddp.raw" | median)
			h=$(awk -v k="$side sync $np" '$1 " " $2 " " $3 == k && $6 != "-" { sub(/%/, "", $6); print $6 }' "$OUT/ddp.raw" | median | awk '{ printf "%.0f", $1 }')
			[ "$np" = 1 ] && t1=$s
			awk -v side="$side" -v np="$np" -v s="$s" -v l="$l" -v t1="${t1:-nan}" -v h="$h" 'BEGIN {
				printf "%-6s %3d %10.2f %10.2f %10.2f %12.0f %7s %8s\n", side, np, s, l, s - l, 64 * np * 1000 / s,
					(t1 == "nan" ? "-" : sprintf("%.2f", t1 / s)), (h == "nan" ? "-" : h "%")
			}'
		done
	done
}
table | tee "$OUT/ddp.txt"
