#!/bin/sh
# allreduce.sh runs gorun's collbench all-reduce and Open MPI's
# MPI_Allreduce (bench/mpi/allreduce.c) over TCP on this machine, for each
# rank count in NPS, and prints them side by side: time and bus bandwidth
# of each, and the ratios gorun/ompi (time ratio < 1 and busbw ratio > 1
# mean gorun is faster).
#
#   bench/allreduce.sh                      # np 2 and 4, 8 B to 64 MiB
#   NPS="2 4 8" MAX=16M ITERS=10 bench/allreduce.sh
#
# Needs go, mpicc and mpirun (Debian: openmpi-bin, libopenmpi-dev).
set -eu
cd "$(dirname "$0")/.."
NPS=${NPS:-"2 4"}
MIN=${MIN:-8}
MAX=${MAX:-64M}
ITERS=${ITERS:-20}
WARM=${WARM:-5}
dir=$(mktemp -d "${TMPDIR:-/tmp}/gorun-allreduce.XXXXXX")
trap 'rm -rf "$dir"' EXIT

go build -o "$dir/gorun" ./cmd/gorun
go build -o "$dir/collbench" ./examples/collbench
mpicc -O2 -o "$dir/allreduce" bench/mpi/allreduce.c

printf '%-4s %12s %13s %12s %12s %8s %10s %10s %8s\n' \
	"# np" bytes algo gorun_us ompi_us time_x gorun_GBps ompi_GBps busbw_x
for np in $NPS; do
	GORUN_TRANSPORT=tcp "$dir/gorun" -np "$np" "$dir/collbench" --op allreduce \
		-b "$MIN" -e "$MAX" -n "$ITERS" -w "$WARM" >"$dir/gorun.$np" 2>"$dir/gorun.$np.err" ||
		{ cat "$dir/gorun.$np.err" >&2; exit 1; }
	mpirun --mca pml ob1 --mca btl tcp,self --oversubscribe --allow-run-as-root -np "$np" \
		"$dir/allreduce" -b "$MIN" -e "$MAX" -n "$ITERS" -w "$WARM" >"$dir/ompi.$np"
	# Columns: op np bytes count type redop algo time_us algbw busbw wrong.
	awk '
		FNR == NR { if ($1 !~ /^#/) { t[$3] = $8; bw[$3] = $10 }; next }
		$1 !~ /^#/ && ($3 in t) {
			printf "%-4d %12d %13s %12.2f %12.2f %8.2f %10.3f %10.3f %8.2f\n",
				$2, $3, $7, $8, t[$3], $8 / t[$3], $10, bw[$3], (bw[$3] > 0 ? $10 / bw[$3] : 0)
		}' "$dir/ompi.$np" "$dir/gorun.$np"
done
