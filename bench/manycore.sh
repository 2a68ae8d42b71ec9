#!/bin/sh
# manycore.sh is the many-core check of issue #29, for a machine with no Go
# and no Open MPI: it runs from a devrun/ bundle (make-bundle.sh, see
# DEVELOPERS.md) and writes one summary, $OUT/manycore.txt. For each rank
# count and collective it runs, taking turns, REPS times: gorun as it is
# (each rank given GOMAXPROCS = its share of the cores), gorun with every
# rank at GOMAXPROCS = all cores (GOMAXPROCS set by the user: gorun's
# behaviour before), and Open MPI's coll; then devrun/bin/compare prints
# each size's medians and ratios. Then the launch: gorun -np NP and
# mpirun -np NP of an Init-and-Barrier program, LAUNCH runs each.
#
#   rm -rf /tmp/ompib && cp -a devrun/ompi /tmp/ompib && . devrun/env.sh
#   OUT=/tmp/out bench/manycore.sh
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-bench/out}
NPS=${NPS:-"16 8 4 2"}
OPS=${OPS:-"allreduce allgather"}
REPS=${REPS:-3}
LAUNCH=${LAUNCH:-5}
ZNPS=${ZNPS:-"4 16"}
B=devrun/bin
cores=$(nproc)
mkdir -p "$OUT"
d=$(mktemp -d)
sum=$OUT/manycore.txt
{
	echo "# $(uname -n), $cores cores, $(date -u +%FT%TZ)"
	grep -m1 'model name' /proc/cpuinfo
} >"$sum"

# pass NAME NP OP: one run of each pass (small, then middle sizes) of one side.
pass() {
	name=$1 np=$2 op=$3
	for p in "8 32K 2000 200" "64K 4M 200 20"; do
		set -- $p
		case $name in
		gorun) $B/gorun -np "$np" $B/collbench --op "$op" -b "$1" -e "$2" -n "$3" -w "$4" ;;
		gorun2) GOMAXPROCS=2 $B/gorun -np "$np" $B/collbench --op "$op" -b "$1" -e "$2" -n "$3" -w "$4" ;;
		gorun16) GOMAXPROCS=$cores $B/gorun -np "$np" $B/collbench --op "$op" -b "$1" -e "$2" -n "$3" -w "$4" ;;
		ompi) mpirun --oversubscribe -np "$np" /tmp/ompib/bin/coll -op "$op" -b "$1" -e "$2" -n "$3" -w "$4" ;;
		esac
	done
}

for np in $NPS; do
	for op in $OPS; do
		for side in gorun gorun2 gorun16 ompi; do : >"$d/$side.$op.$np"; done
		for rep in $(seq "$REPS"); do
			for side in gorun gorun2 gorun16 ompi; do
				pass "$side" "$np" "$op" >>"$d/$side.$op.$np" 2>>"$d/err" || echo "# $side $op np $np failed: $(tail -3 "$d/err")" >>"$sum"
			done
		done
		{
			echo
			echo "## $op np $np: gorun (GOMAXPROCS share) against Open MPI"
			$B/compare "$op np $np" "$d/gorun.$op.$np" "$d/ompi.$op.$np"
			echo "## $op np $np: gorun with GOMAXPROCS=2 against Open MPI"
			$B/compare "$op np $np" "$d/gorun2.$op.$np" "$d/ompi.$op.$np"
			echo "## $op np $np: gorun with GOMAXPROCS=$cores (before) against Open MPI"
			$B/compare "$op np $np" "$d/gorun16.$op.$np" "$d/ompi.$op.$np"
		} >>"$sum" 2>&1
	done
done

# Launch to exit of an Init-and-Barrier program.
ms() { s=$(date +%s%N); "$@" >/dev/null 2>&1; echo $(( ($(date +%s%N) - s) / 1000000 )); }
for np in ${LNP:-16}; do
	g="" m=""
	for i in $(seq "$LAUNCH"); do
		g="$g $(ms $B/gorun -np "$np" $B/initbarrier)"
		m="$m $(ms mpirun --oversubscribe -np "$np" /tmp/ompib/bin/init_barrier)"
	done
	echo >>"$sum"
	echo "## launch to exit, np $np, ms: gorun$g; mpirun$m" >>"$sum"
done

# Training steps: median ms per step of 20 (the first 5 left out).
if [ -x $B/zero ]; then
	echo >>"$sum"
	echo "## MLP 784-1024-1024-10, AdamW, batch 64 per rank: median ms per step" >>"$sum"
	for np in $ZNPS; do
		for gm in share 2 $cores; do
			line="np $np GOMAXPROCS=$gm:"
			for mode in --ddp "--zero 1" "--zero 2" "--zero 3"; do
				if [ "$gm" = share ]; then e=""; else e="GOMAXPROCS=$gm"; fi
				t=$(env $e $B/gorun -np "$np" $B/zero $mode --steps 20 --batch $((64 * np)) --optim adamw --lr 1e-3 2>>"$d/err" |
					awk -v b=$((64 * np)) '$1 == "step" && $2 > 5 { print 1000 * b / $6 }' | sort -g | awk '{ v[NR] = $1 } END { printf "%.2f", NR ? v[int((NR + 1) / 2)] : -1 }')
				line="$line $mode $t"
			done
			echo "$line" >>"$sum"
		done
	done
fi
echo "# done $(date -u +%FT%TZ)" >>"$sum"
cat "$sum"
