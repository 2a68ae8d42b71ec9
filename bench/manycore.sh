#!/bin/sh
# manycore.sh is the many-core check of issue #29, for a machine with no Go
# and no Open MPI: it runs from a devrun/ bundle (make-bundle.sh, see
# DEVELOPERS.md) and writes $OUT/manycore.txt (the summary),
# $OUT/tune.txt (gorun --tune's reports) and $OUT/tune.json (everything
# the tuning measured, one --tune-json report per NP, for bench/replay).
#
#  1. gorun --tune -np NP for each NP in NPS, sizes TUNE_SIZES, into one
#     decision table: each report ends with how often the cost model's
#     choice was within 15% of the fastest algorithm measured, on this
#     machine (the choice target).
#  2. For each rank count and collective, REPS times in turn: gorun with
#     the model's choice (GORUN_TUNE_FILE=none), gorun with the table of
#     step 1 (at the rank counts in TNPS), gorun --bind-to none where the
#     ranks are as many as the cores (auto binds them there), and Open
#     MPI's coll; then
#     devrun/bin/compare prints each size's medians and ratios. Small sizes
#     (8 B-4 KiB) and middle ones (64 KiB-4 MiB), the issue's targets.
#     Then all-reduces of 16-64 MiB at the rank counts in TNPS.
#  3. Launch to exit: gorun -np NP and mpirun -np NP of an Init-and-Barrier
#     program, LAUNCH runs each.
#  4. Where devrun/bin/percall is (bench/percall: CGO_ENABLED=0 go build
#     -o devrun/bin/percall ./bench/percall), the per-call percentiles of 8-byte all-reduces (Shared, then recursive
#     doubling) and 1 KiB all-gathers at the largest NP, bound by auto
#     (auto's timer slack, none at more than 2 ranks a host, then
#     --timer-slack 500us) and unbound.
#
#  5. Where /tmp/ompib/bin/first is too (bench/mpi/first.c: mpicc -O2 -o
#     devrun/ompi/bin/first bench/mpi/first.c, then patchelf
#     --set-interpreter /tmp/ompib/lib/ld-linux-x86-64.so.2 --force-rpath
#     --set-rpath "$(patchelf --print-rpath devrun/ompi/bin/coll)" on it),
#     a job's first 4 all-reduces at np FNPS (16 4 2) of 8 B, 64 KiB and
#     1 MiB, twice: gorun with the model (its probe), with step 1's
#     table, and Open MPI, into $OUT/first.txt.
#
#   rm -rf /tmp/ompib && cp -a devrun/ompi /tmp/ompib && . devrun/env.sh
#   OUT=/tmp/out bench/manycore.sh
#
# The bundle with percall and first stays under the device's 64 MiB with
# the working tree (55 MiB on 2026-11-27, devrun/bin/hello left out).
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-bench/out}
NPS=${NPS:-"16 8 4 2"}
TNPS=${TNPS:-"16 4"}
OPS=${OPS:-"allreduce allgather broadcast"}
REPS=${REPS:-3}
LAUNCH=${LAUNCH:-5}
TUNE_SIZES=${TUNE_SIZES:-8-4M}
B=devrun/bin
cores=$(nproc)
mkdir -p "$OUT"
d=$(mktemp -d)
sum=$OUT/manycore.txt
tunef=$d/tune.toml
start=$(date +%s)
el() { echo $(($(date +%s) - start)); }
{
	echo "# $(uname -n), $cores cores, $(date -u +%FT%TZ)"
	grep -m1 'model name' /proc/cpuinfo
} >"$sum"

# 1. The decision table, and the model's agreement with it.
: >"$OUT/tune.txt"
: >"$OUT/tune.json"
for np in $NPS; do
	echo "## gorun --tune -np $np --tune-sizes $TUNE_SIZES" >>"$OUT/tune.txt"
	GORUN_TUNE_FILE=$tunef timeout 120 $B/gorun --tune -np "$np" --tune-sizes "$TUNE_SIZES" --tune-json "$d/tune.$np.json" >>"$OUT/tune.txt" 2>&1 ||
		echo "# tune np $np failed" >>"$sum"
	cat "$d/tune.$np.json" >>"$OUT/tune.json" 2>/dev/null
	echo "tune np $np ($(el) s): $(grep 'model agreement' "$OUT/tune.txt" | tail -1)" >>"$sum"
done

# pass NAME NP OP: one run of each pass (small, then middle sizes) of one side.
pass() {
	name=$1 np=$2 op=$3
	for p in "8 4K 2000 500" "64K 4M 200 20"; do
		set -- $p
		case $name in
		model) GORUN_TUNE_FILE=none timeout 60 $B/gorun -np "$np" $B/collbench --op "$op" -b "$1" -e "$2" -n "$3" -w "$4" ;;
		unbound) GORUN_TUNE_FILE=none timeout 60 $B/gorun -np "$np" --bind-to none $B/collbench --op "$op" -b "$1" -e "$2" -n "$3" -w "$4" ;;
		table) GORUN_TUNE_FILE=$tunef timeout 60 $B/gorun -np "$np" $B/collbench --op "$op" -b "$1" -e "$2" -n "$3" -w "$4" ;;
		ompi) timeout 60 mpirun --oversubscribe -np "$np" /tmp/ompib/bin/coll -op "$op" -b "$1" -e "$2" -n "$3" -w "$4" ;;
		esac
	done
}

# 2. The collectives against Open MPI.
for np in $NPS; do
	sides="model ompi"
	case " $TNPS " in *" $np "*) sides="model table ompi" ;; esac
	[ "$np" = "$cores" ] && sides="model unbound ${sides#model }"
	for op in $OPS; do
		for side in $sides; do : >"$d/$side.$op.$np"; done
		for rep in $(seq "$REPS"); do
			for side in $sides; do
				pass "$side" "$np" "$op" >>"$d/$side.$op.$np" 2>>"$d/err" || echo "# $side $op np $np failed: $(tail -3 "$d/err")" >>"$sum"
			done
		done
		{
			echo
			echo "## $op np $np ($(el) s): gorun, the model's choice, against Open MPI"
			$B/compare "$op np $np" "$d/model.$op.$np" "$d/ompi.$op.$np"
			if [ -s "$d/unbound.$op.$np" ]; then
				echo "## $op np $np: gorun, the model's choice, --bind-to none (gorun before auto binding) against Open MPI"
				$B/compare "$op np $np" "$d/unbound.$op.$np" "$d/ompi.$op.$np"
			fi
			if [ -s "$d/table.$op.$np" ]; then
				echo "## $op np $np: gorun with gorun --tune's table against Open MPI"
				$B/compare "$op np $np" "$d/table.$op.$np" "$d/ompi.$op.$np"
			fi
		} >>"$sum" 2>&1
	done
done

# 2b. Large all-reduces (16-64 MiB), at the first and the last rank count
# of TNPS: 2 runs each, in turn.
for np in $TNPS; do
	: >"$d/bigg.$np"
	: >"$d/bigo.$np"
	for rep in 1 2; do
		GORUN_TUNE_FILE=none timeout 90 $B/gorun -np "$np" $B/collbench --op allreduce -b 16M -e 64M -n 10 -w 3 >>"$d/bigg.$np" 2>>"$d/err"
		timeout 90 mpirun --oversubscribe -np "$np" /tmp/ompib/bin/coll -op allreduce -b 16M -e 64M -n 10 -w 3 >>"$d/bigo.$np" 2>>"$d/err"
	done
	{
		echo
		echo "## allreduce 16-64 MiB np $np ($(el) s): gorun, the model's choice, against Open MPI"
		$B/compare "allreduce np $np" "$d/bigg.$np" "$d/bigo.$np"
	} >>"$sum" 2>&1
done

# 3. Launch to exit of an Init-and-Barrier program.
ms() { s=$(date +%s%N); "$@" >/dev/null 2>&1; echo $((($(date +%s%N) - s) / 1000000)); }
for np in ${LNP:-16}; do
	g="" m=""
	for i in $(seq "$LAUNCH"); do
		g="$g $(ms $B/gorun -np "$np" $B/initbarrier)"
		m="$m $(ms mpirun --oversubscribe -np "$np" /tmp/ompib/bin/init_barrier)"
	done
	echo >>"$sum"
	echo "## launch to exit, np $np, ms: gorun$g; mpirun$m" >>"$sum"
done

# 4. Per-call times (bench/percall), ranks 0 and the last.
if [ -x $B/percall ]; then
	np=${NPS%% *}
	echo >>"$sum"
	echo "## bench/percall at np $np, per-call percentiles (us)" >>"$sum"
	for v in "" "--timer-slack 500us" "--bind-to none"; do
		for t in "allreduce 8 20000" "allreduce 8 2000 recdbl" "allgather 1K 20000"; do
			set -- $t
			echo "# gorun -np $np $v: $1 of $2 B${4:+ by $4}" >>"$sum"
			GORUN_ALGO=${4:-} timeout 60 $B/gorun -np "$np" $v --report-bindings $B/percall --op "$1" --bytes "$2" --calls "$3" >"$d/pc" 2>&1
			grep -E "^r(0|$((np - 1))) " "$d/pc" >>"$sum"
			echo "# ranks with a timer slack: $(grep -c 'timer slack' "$d/pc")" >>"$sum"
		done
	done
fi
# 5. A job's first calls.
if [ -x $B/percall ] && [ -x /tmp/ompib/bin/first ]; then
	f=$OUT/first.txt
	echo "# a job's first 4 all-reduces (us), rank 0 and the last: the model (its probe), gorun --tune's table, Open MPI" >"$f"
	for np in ${FNPS:-16 4 2}; do
		for b in 8 65536 1048576; do
			for r in 1 2; do
				echo "## np $np, $b B, run $r" >>"$f"
				GORUN_TUNE_FILE=none timeout 60 $B/gorun -np "$np" $B/percall --first 4 --bytes $b 2>&1 | grep -E "^r(0|$((np - 1))) " | sed 's/^/model /' >>"$f"
				GORUN_TUNE_FILE=$tunef timeout 60 $B/gorun -np "$np" $B/percall --first 4 --bytes $b 2>&1 | grep -E "^r(0|$((np - 1))) " | sed 's/^/table /' >>"$f"
				timeout 60 mpirun --oversubscribe -np "$np" /tmp/ompib/bin/first $b 4 2>&1 | sed 's/^/ompi  /' >>"$f"
			done
		done
	done
	echo "first calls ($(el) s): $f" >>"$sum"
fi
echo "# done $(date -u +%FT%TZ), $(el) s" >>"$sum"
cat "$sum"
