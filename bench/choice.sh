#!/bin/sh
# choice.sh checks topo's algorithm choice by measurement: for each rank
# count in NPS and each collective in OPS it runs collbench once per
# algorithm (forced with --algo) and once with topo's choice, and counts the
# sizes at which the chosen algorithm's time is within 15% of the fastest
# algorithm's (both taken from the forced runs, so that one set of
# measurements judges every choice).
#
#   bench/choice.sh                  # np 4 and 8; allreduce, broadcast, allgather; 8 B to 64 MiB
#   NPS=4 OPS=allreduce bench/choice.sh
set -eu
cd "$(dirname "$0")/.."
NPS=${NPS:-"4 8"}
OPS=${OPS:-"allreduce broadcast allgather"}
TOL=${TOL:-1.15}
dir=$(mktemp -d "${TMPDIR:-/tmp}/gorun-choice.XXXXXX")
trap 'rm -rf "$dir"' EXIT
go build -o "$dir/gorun" ./cmd/gorun
go build -o "$dir/collbench" ./examples/collbench

# algos lists the one-host algorithms of a collective (topo.Algos without hier).
algos() {
	case $1 in
	allreduce) echo ring tree recdbl rabenseifner ;;
	broadcast) echo tree ring linear ;;
	allgather) echo ring recdbl linear ;;
	reduce) echo tree ring rabenseifner linear ;;
	reducescatter) echo ring rabenseifner linear ;;
	esac
}

# bench runs collbench over the small sizes with many iterations and the
# large ones with few; extra arguments go to collbench.
bench() {
	np=$1
	shift
	"$dir/gorun" -np "$np" "$dir/collbench" -b 8 -e 512K -n 20 -w 5 "$@" | grep -v '^#'
	"$dir/gorun" -np "$np" "$dir/collbench" -b 1M -e 64M -n 4 -w 1 "$@" | grep -v '^#'
}

for np in $NPS; do
	for op in $OPS; do
		: >"$dir/runs"
		for a in $(algos "$op"); do
			bench "$np" --op "$op" --algo "$a" >>"$dir/runs"
		done
		bench "$np" --op "$op" >"$dir/auto"
		# Columns: op np bytes count type redop algo time_us ...
		awk -v tol="$TOL" -v op="$op" -v np="$np" '
			FNR == NR { t[$3, $7] = $8; if (!($3 in best) || $8 < best[$3]) { best[$3] = $8; fastest[$3] = $7 }; next }
			{
				n++; c = t[$3, $7]; r = c / best[$3]
				ok = r <= tol; good += ok
				printf "%-10s np %d %10d  chose %-13s %10.1f us  fastest %-13s %10.1f us  x%.2f %s\n",
					op, np, $3, $7, c, fastest[$3], best[$3], r, ok ? "" : "SLOW"
			}
			END { printf "# %s np %d: %d of %d sizes within %.0f%% of the fastest\n", op, np, good, n, (tol - 1) * 100 }
		' "$dir/runs" "$dir/auto"
	done
done
