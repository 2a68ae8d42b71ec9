#!/bin/sh
# choice.sh checks the algorithm choice (prims.Choose) by measurement: for each rank
# count in NPS and each collective in OPS it runs collbench with every
# algorithm (forced with --algo) and once with the model's choice, and counts the
# sizes at which the chosen algorithm's time is within 15% of the fastest
# algorithm's (both taken from the forced runs, so that one set of
# measurements judges every choice). The forced runs time every algorithm
# in one collbench run per size range (--algo a,b,c), REPS rounds (5) in
# which the algorithms take turns at each size, and each (size, algorithm)
# counts with its median time: single runs of one algorithm differed by up
# to 2x on small messages, as much as the algorithms differ, and on a
# noisy host whole runs are fast or slow by 2-5x for minutes, which runs
# of one algorithm after another caught for one algorithm and not the
# next.
#
#   bench/choice.sh                  # np 4 and 8; allreduce, broadcast, allgather; 8 B to 64 MiB
#   NPS=4 OPS=allreduce bench/choice.sh
#   OUT=/tmp/choice bench/choice.sh  # also keep every run and the topo report (for bench/replay)
#   GORUN_TRANSPORT=tcp NPS=4 OPS=allreduce bench/choice.sh   # over TCP only
#
# Each cell ends with the share of CPU time the hypervisor stole while it
# ran (/proc/stat), as bench/mpi.sh's tables do: forced runs taken
# through a burst of steal are slow by up to 3x and can make the fastest
# algorithm look slow.
set -eu
cd "$(dirname "$0")/.."
NPS=${NPS:-"4 8"}
OPS=${OPS:-"allreduce broadcast allgather"}
TOL=${TOL:-1.15}
REPS=${REPS:-5}
dir=$(mktemp -d "${TMPDIR:-/tmp}/gorun-choice.XXXXXX")
trap 'rm -rf "$dir"' EXIT
# The model alone is judged: no decision table of gorun --tune.
export GORUN_TUNE_FILE=none
go build -o "$dir/gorun" ./cmd/gorun
go build -o "$dir/collbench" ./examples/collbench

# algos lists the one-host algorithms of a collective (prims.Algos without
# hier); over TCP only (GORUN_TRANSPORT=tcp) without shared, which needs
# shared memory.
algos() {
	if [ "${GORUN_TRANSPORT:-}" = tcp ]; then
		GORUN_TRANSPORT= algos "$1" | sed 's/ *shared//'
		return
	fi
	case $1 in
	allreduce) echo ring tree recdbl rabenseifner linear shared ;;
	broadcast) echo tree ring linear shared ;;
	allgather) echo ring recdbl linear shared ;;
	reduce) echo tree ring rabenseifner linear shared ;;
	reducescatter) echo ring rabenseifner linear shared ;;
	alltoall) echo linear shared ;;
	gather | scatter) echo linear tree shared ;;
	esac
}

# bench runs collbench over the small sizes with many iterations and the
# large ones with few; extra arguments go to collbench.
bench() {
	np=$1
	shift
	"$dir/gorun" -np "$np" "$dir/collbench" -b 8 -e 512K -n 100 -w 10 "$@" | grep -v '^#'
	"$dir/gorun" -np "$np" "$dir/collbench" -b 1M -e 64M -n 10 -w 3 "$@" | grep -v '^#'
}

# cpu prints the steal and total jiffies of all CPUs so far (/proc/stat).
cpu() { awk '/^cpu / { print $9, $2+$3+$4+$5+$6+$7+$8+$9; exit }' /proc/stat 2>/dev/null || echo "0 0"; }

for np in $NPS; do
	for op in $OPS; do
		before=$(cpu)
		bench "$np" --op "$op" --algo "$(algos "$op" | tr ' ' ,)" -r "$REPS" >"$dir/runs"
		bench "$np" --op "$op" -r 1 >"$dir/auto"
		if [ -n "${OUT:-}" ]; then
			mkdir -p "$OUT"
			cp "$dir/runs" "$OUT/$op.$np.runs"
			cp "$dir/auto" "$OUT/$op.$np.auto"
			"$dir/gorun" --topo -np "$np" >"$OUT/topo.$np.txt" 2>&1 || true
		fi
		# Columns: op np bytes count type redop algo time_us ...
		awk -v tol="$TOL" -v op="$op" -v np="$np" '
			# median of the times in the space-separated list l
			function median(l,   v, n, i, j, x) {
				n = split(l, v, " ")
				for (i = 2; i <= n; i++) { x = v[i] + 0; for (j = i - 1; j >= 1 && v[j] + 0 > x; j--) v[j + 1] = v[j]; v[j + 1] = x }
				return v[int((n + 1) / 2)]
			}
			FNR == NR { all[$3, $7] = all[$3, $7] " " $8; next }
			FNR == 1 {
				for (k in all) {
					split(k, ka, SUBSEP); t[k] = median(all[k])
					if (!(ka[1] in best) || t[k] < best[ka[1]]) { best[ka[1]] = t[k]; fastest[ka[1]] = ka[2] }
				}
			}
			{
				n++; c = t[$3, $7]; r = c / best[$3]
				ok = r <= tol; good += ok
				printf "%-10s np %d %10d  chose %-13s %10.1f us  fastest %-13s %10.1f us  x%.2f %s\n",
					op, np, $3, $7, c, fastest[$3], best[$3], r, ok ? "" : "SLOW"
			}
			END { printf "# %s np %d: %d of %d sizes within %.0f%% of the fastest\n", op, np, good, n, (tol - 1) * 100 }
		' "$dir/runs" "$dir/auto"
		echo "$before $(cpu)" | awk -v s="$op np $np" '$4 > $2 { printf "# steal during %s: %.1f%% of the CPU time\n", s, 100 * ($3 - $1) / ($4 - $2) }'
	done
done
