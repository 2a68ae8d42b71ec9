#!/bin/sh
# manycore-ab.sh compares two builds of gorun on a many-core machine with
# no Go, from a devrun/ bundle (see manycore.sh): A, the binaries in
# $A (default devrun/old/bin), against B, those in $B (devrun/bin), with
# Open MPI's coll beside, at NP ranks (default: as many as the cores, one
# rank per core, where the small collectives' tail was).
#
#  1. For each collective in OPS, REPS times in turn: A's collbench, B's,
#     Open MPI's, 8 B-4 KiB (2000 calls after 500); then B against A and
#     each against Open MPI (devrun/bin/compare: medians and ratios).
#  2. bench/percall's 8-byte all-reduce, PCREPS times in turn for A and B,
#     ranks 0 and the last: percentiles, context switches, and each rank's
#     thread runs (busiest thread, sysmon, the others).
#
# Writes $OUT/ab.txt. A's binaries, from another commit, beside the bundle:
#
#   git worktree add /tmp/old COMMIT && (cd /tmp/old && for p in \
#     gorun:./cmd/gorun collbench:./examples/collbench percall:./bench/percall; do \
#     CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o "$OLDPWD/devrun/old/bin/${p%%:*}" "${p#*:}"; done)
#
# and on the machine:
#
#   rm -rf /tmp/ompib && cp -a devrun/ompi /tmp/ompib && . devrun/env.sh
#   OUT=$OUT sh bench/manycore-ab.sh
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-bench/out}
A=${A:-devrun/old/bin}
B=${B:-devrun/bin}
NP=${NP:-$(nproc)}
OPS=${OPS:-"allreduce allgather broadcast"}
REPS=${REPS:-5}
PCREPS=${PCREPS:-3}
for f in "$A/gorun" "$A/collbench" "$B/gorun" "$B/collbench" "$B/compare"; do
	[ -x "$f" ] || { echo "manycore-ab.sh: $f missing (see the header)" >&2; exit 2; }
done
mkdir -p "$OUT"
sum=$OUT/ab.txt
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
start=$(date +%s)
el() { echo $(($(date +%s) - start)); }
{
	echo "# $(uname -n), $(nproc) cores, $(date -u +%FT%TZ), np $NP: A $A, B $B"
	grep -m1 'model name' /proc/cpuinfo
} >"$sum"

# side NAME OP: one run of the small sizes.
side() {
	case $1 in
	A | B)
		eval "bin=\$$1"
		GORUN_TUNE_FILE=none timeout 60 "$bin/gorun" -np "$NP" "$bin/collbench" --op "$2" -b 8 -e 4K -n 2000 -w 500
		;;
	ompi) timeout 60 mpirun --oversubscribe -np "$NP" /tmp/ompib/bin/coll -op "$2" -b 8 -e 4K -n 2000 -w 500 ;;
	esac
}

# 1. The small collectives.
for op in $OPS; do
	for s in A B ompi; do : >"$d/$s.$op"; done
	for rep in $(seq "$REPS"); do
		for s in A B ompi; do
			side $s "$op" >>"$d/$s.$op" 2>>"$d/err" || echo "# $s $op failed: $(tail -3 "$d/err")" >>"$sum"
		done
	done
	{
		echo
		echo "## $op np $NP ($(el) s), medians of $REPS: B against A (the ompi columns are A)"
		$B/compare "$op np $NP" "$d/B.$op" "$d/A.$op"
		echo "## A against Open MPI"
		$B/compare "$op np $NP" "$d/A.$op" "$d/ompi.$op"
		echo "## B against Open MPI"
		$B/compare "$op np $NP" "$d/B.$op" "$d/ompi.$op"
	} >>"$sum" 2>&1
done

# 2. Per-call times and threads.
if [ -x "$A/percall" ] && [ -x "$B/percall" ]; then
	echo >>"$sum"
	echo "## bench/percall --bytes 8 --calls 20000 at np $NP ($(el) s), ranks 0 and $((NP - 1))" >>"$sum"
	for rep in $(seq "$PCREPS"); do
		for s in A B; do
			eval "bin=\$$s"
			timeout 60 "$bin/gorun" -np "$NP" -q "$bin/percall" --bytes 8 --calls 20000 >"$d/pc" 2>&1
			grep -E "^r(0|$((NP - 1))) " "$d/pc" | sed "s/^/$s /" >>"$sum"
		done
	done
fi
echo "# done ($(el) s)" >>"$sum"
