#!/bin/sh
# mpi.sh runs gorun's collbench and Open MPI (bench/mpi/coll.c) with the
# same collectives, sizes and rank counts in one run, prints them side by
# side with their ratios (bench/compare), and writes an SVG chart of bus
# bandwidth against size.
#
#   bench/mpi.sh                         # make bench-mpi: default transports
#   MODE=tcp bench/mpi.sh                # make bench-tcp: both over TCP only
#   OPS="allreduce" NPS="2 4" MAX=16M ITERS=10 bench/mpi.sh
#   OPS=alltoall bench/mpi.sh            # also: allreduce broadcast allgather reduce gather scatter
#
# Sizes below SPLIT (64K) run ITERS_SMALL iterations (10000) after
# WARM_SMALL warm-up ones (1000), as the OSU micro-benchmarks run small
# messages: one iteration takes microseconds, and a series of 1000 timed
# one scheduler pause of a millisecond or two as much as the calls
# themselves. Sizes from SPLIT to below LARGE (1M) run ITERS_MID (500)
# after WARM_MID (50), as OSU runs its large messages with 1000 after 100:
# at 64-512 KiB a call takes 0.1-1 ms, so 20 calls lasted 2-20 ms, and
# with more ranks than cores one stretch of a rank waiting for a core
# decided the figure. All-reduce over TCP at np 4, 7 runs of 20 calls
# after 5: 64 KiB took 120-1407 us for gorun and 210-377 for Open MPI;
# with 500 after 50 (5 runs), 123-172 against 186-240. LARGE and up run
# ITERS after WARM. Each side runs REPS times
# (5), alternating, and each size counts with its median: on 2 cores with
# more ranks than cores a whole run is fast or slow by up to 3x (on both
# sides), as the ranks happen to share the cores, and a median of 3 runs
# still moved a size's ratio by a third. The small pass, which takes
# seconds, runs REPS_SMALL times (11): its sizes differ between the two
# sides by 5-15% while single runs differ by 10-30%. 11 alternating runs
# at np 2 over TCP put gorun at 0.86-0.93x Open MPI's time at 8 B-2 KiB;
# medians of 5 of those 11, drawn at random, came out above 1.0x for up to
# a third of the draws at a size.
#
# MODE=default runs each side as it runs out of the box: gorun with shared
# memory between the ranks of a host, mpirun --oversubscribe with its
# default transports (vader shared memory). MODE=tcp forces TCP on both
# (GORUN_TRANSPORT=tcp; --mca pml ob1 --mca btl tcp,self).
# Results go to bench/out/MODE.txt and bench/out/MODE.svg (OUT to change).
# The table ends with the share of CPU time that the hypervisor stole
# during each series (/proc/stat): a series run while others took the
# cores is slow on whichever side ran then, by up to 3x.
#
# Needs go, mpicc and mpirun (Debian: openmpi-bin, libopenmpi-dev).
set -eu
cd "$(dirname "$0")/.."
MODE=${MODE:-default}
OPS=${OPS:-"allreduce broadcast allgather"}
NPS=${NPS:-"2 4 8"}
MIN=${MIN:-8}
MAX=${MAX:-64M}
ITERS=${ITERS:-20}
ITERS_SMALL=${ITERS_SMALL:-10000}
SPLIT=${SPLIT:-64K}
LARGE=${LARGE:-1M}
ITERS_MID=${ITERS_MID:-500}
WARM_MID=${WARM_MID:-50}
REPS=${REPS:-5}
REPS_SMALL=${REPS_SMALL:-11}
WARM=${WARM:-5}
WARM_SMALL=${WARM_SMALL:-1000}
OUT=${OUT:-bench/out}
dir=$(mktemp -d "${TMPDIR:-/tmp}/gorun-bench.XXXXXX")
trap 'rm -rf "$dir"' EXIT
mkdir -p "$OUT"

case $MODE in
default) gorun_env="" ; ompi_mca="" ;;
tcp) gorun_env="GORUN_TRANSPORT=tcp" ; ompi_mca="--mca pml ob1 --mca btl tcp,self" ;;
*) echo "mpi.sh: MODE=$MODE: want default or tcp" >&2; exit 2 ;;
esac

go build -o "$dir/gorun" ./cmd/gorun
go build -o "$dir/collbench" ./examples/collbench
go build -o "$dir/compare" ./bench/compare
mpicc -O2 -o "$dir/coll" bench/mpi/coll.c

# bytes K|M|G -> a count. The passes: MIN..SPLIT/2 small, SPLIT..LARGE/2
# middle, LARGE..MAX large, each clipped to MIN..MAX.
bytes() { numfmt --from=iec "$1"; }
split=$(bytes "$SPLIT") large=$(bytes "$LARGE") min=$(bytes "$MIN") max=$(bytes "$MAX")
passes=""
addpass() { # lo hi iters warm-up reps
	lo=$(( $1 > min ? $1 : min )) hi=$(( $2 < max ? $2 : max ))
	[ "$lo" -le "$hi" ] && passes="$passes $lo:$hi:$3:$4:$5"
	return 0
}
addpass "$min" $((split / 2)) "$ITERS_SMALL" "$WARM_SMALL" "$REPS_SMALL"
addpass "$split" $((large / 2)) "$ITERS_MID" "$WARM_MID" "$REPS"
addpass "$large" "$max" "$ITERS" "$WARM" "$REPS"
maxreps=$(( REPS > REPS_SMALL ? REPS : REPS_SMALL ))

# cpu prints the steal and total jiffies of all CPUs so far (/proc/stat):
# time the hypervisor gave this machine's CPUs to others, which lands on
# whichever side runs then.
cpu() { awk '/^cpu / { print $9, $2+$3+$4+$5+$6+$7+$8+$9; exit }' /proc/stat 2>/dev/null || echo "0 0"; }

series="" steal=""
for op in $OPS; do
	for np in $NPS; do
		g="$dir/gorun.$op.$np" o="$dir/ompi.$op.$np"
		: >"$g"; : >"$o"
		before=$(cpu)
		for rep in $(seq "$maxreps"); do
			for pass in $passes; do
				lo=${pass%%:*} rest=${pass#*:} hi=${rest%%:*} rest=${rest#*:}
				n=${rest%%:*} rest=${rest#*:} w=${rest%%:*} reps=${rest#*:}
				[ "$rep" -le "$reps" ] || continue
				env $gorun_env "$dir/gorun" -np "$np" "$dir/collbench" --op "$op" \
					-b "$lo" -e "$hi" -n "$n" -w "$w" >>"$g" 2>"$g.err" ||
					{ cat "$g.err" >&2; exit 1; }
				# shellcheck disable=SC2086
				mpirun $ompi_mca --oversubscribe --allow-run-as-root -np "$np" \
					"$dir/coll" -op "$op" -b "$lo" -e "$hi" -n "$n" -w "$w" >>"$o"
			done
		done
		series="$series|$op np $np|$g|$o"
		steal="$steal$(echo "$before $(cpu)" | awk -v s="$op np $np" '$4 > $2 { printf "# steal during %s: %.1f%% of the CPU time\n", s, 100 * ($3 - $1) / ($4 - $2) }')
"
	done
done
host=$(uname -n) cores=$(nproc) when=$(date -u +%Y-%m-%d)
title="busbw, $MODE transports, $cores cores ($host), $when: gorun solid, Open MPI dashed"
IFS='|'
# shellcheck disable=SC2086
set -- ${series#|}
unset IFS
{
	"$dir/compare" -svg "$OUT/$MODE.svg" -title "$title" "$@"
	printf '%s' "$steal"
} | tee "$OUT/$MODE.txt"
echo "# chart: $OUT/$MODE.svg" >&2
