#!/bin/sh
# profile.sh measures what gorun --profile costs a job, and what goprof
# costs to read one, in one run:
#
#  1. collbench's 8-byte all-reduce loop (-n ITERS calls) at each np of
#     NPS, with and without --profile, taking turns REPS times: the median
#     time per call of each, and their ratio;
#  2. examples/ddp (the 784-1024-1024-10 MLP, 1 MiB buckets) at np 2, with
#     and without --profile, taking turns: the median step time of each;
#  3. the trace's size per event, from that run's files, and what a
#     one-hour 8-rank job at the same step rate would write;
#  4. goprof report on a synthetic 8-rank training job of EVENTS (1e6)
#     events: its wall time and peak memory (GNU time).
#
#   bench/profile.sh                # make bench-profile
#   NPS="2 4 8" REPS=7 bench/profile.sh
set -eu
cd "$(dirname "$0")/.."
NPS=${NPS:-"2 4"}
REPS=${REPS:-5}
ITERS=${ITERS:-20000}
STEPS=${STEPS:-60}
SKIP=${SKIP:-10}
EVENTS=${EVENTS:-1000000}
OUT=${OUT:-bench/out}
mkdir -p "$OUT"
B=$OUT/profile-bin
mkdir -p "$B"
go build -o "$B/gorun" ./cmd/gorun
go build -o "$B/goprof" ./cmd/goprof
go build -o "$B/collbench" ./examples/collbench
go build -o "$B/ddp" ./examples/ddp
go build -o "$B/synthgen" ./cmd/goprof/internal/synth/synthgen
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1

# best prints the least of the numbers on its input.
best() { sort -g | head -1; }

median() {
	sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print "nan"; else printf "%.4f\n", NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

# prof MODE DIR: the --profile flag for MODE (on or off).
prof() { [ "$1" = on ] && echo "--profile $2" || true; }

: >"$OUT/profile.raw"
for np in $NPS; do
	for rep in $(seq "$REPS"); do
		for mode in off on; do
			rm -rf "$OUT/profile-coll"
			# shellcheck disable=SC2046
			us=$("$B/gorun" -np "$np" $(prof $mode "$OUT/profile-coll") "$B/collbench" -b 8 -e 8 -n "$ITERS" -w 1000 |
				awk '$1 == "allreduce" { print $8 }')
			echo "coll $np $mode $us" >>"$OUT/profile.raw"
		done
	done
done
for rep in $(seq "$REPS"); do
	for mode in off on; do
		rm -rf "$OUT/profile-ddp"
		# shellcheck disable=SC2046
		"$B/gorun" -np 2 $(prof $mode "$OUT/profile-ddp") "$B/ddp" --steps "$STEPS" --batch 128 --bucket-mb 1 >"$OUT/profile.ddp"
		ms=$(awk -v skip="$SKIP" '$1 == "step" && $2 > skip { print 1000 * 128 / $6 }' "$OUT/profile.ddp" | median)
		echo "ddp 2 $mode $ms" >>"$OUT/profile.raw"
	done
done

{
	echo "gorun --profile overhead ($REPS runs each, taking turns): medians, and the best runs"
	printf "%-32s %9s %9s %7s %9s %9s %7s\n" run "off" "on" "on/off" "best off" "best on" "on/off"
	# row NAME KIND NP UNIT: one line of the table.
	row() {
		sel='$1 == k && $2 == np && $3 == m { print $4 }'
		mo=$(awk -v k="$2" -v np="$3" -v m=off "$sel" "$OUT/profile.raw" | median)
		mn=$(awk -v k="$2" -v np="$3" -v m=on "$sel" "$OUT/profile.raw" | median)
		bo=$(awk -v k="$2" -v np="$3" -v m=off "$sel" "$OUT/profile.raw" | best)
		bn=$(awk -v k="$2" -v np="$3" -v m=on "$sel" "$OUT/profile.raw" | best)
		awk -v n="$1" -v u="$4" -v a="$mo" -v b="$mn" -v c="$bo" -v d="$bn" 'BEGIN {
			printf "%-32s %7.2f%s %7.2f%s %7.3f %7.2f%s %7.2f%s %7.3f\n", n, a, u, b, u, b / a, c, u, d, u, d / c }'
	}
	for np in $NPS; do
		row "collbench allreduce 8 B, np $np" coll "$np" us
	done
	row "examples/ddp step, np 2" ddp 2 ms

	events=$("$B/goprof" report --json "$OUT/profile-ddp" | awk -F'[:,]' '/"events"/ { print $2; exit }' | tr -d ' ')
	bytes=$(cat "$OUT"/profile-ddp/rank.*.trace | wc -c)
	secs=$("$B/goprof" report --json "$OUT/profile-ddp" | awk -F'[:,]' '/"duration_ns"/ { print $2 / 1e9; exit }' | tr -d ' ')
	awk -v e="$events" -v b="$bytes" -v s="$secs" 'BEGIN {
		printf "\ntrace size: %d events in %d bytes: %.1f bytes per event\n", e, b, b / e
		printf "examples/ddp np 2 recorded %.0f events/s per rank: a one-hour 8-rank job writes %.0f MiB\n", e / 2 / s, e / 2 / s * 3600 * 8 * (b / e) / 1048576
	}'

	rm -rf "$OUT/profile-big"
	"$B/synthgen" -o "$OUT/profile-big" -ranks 8 -events "$EVENTS"
	n=$("$B/goprof" report --json "$OUT/profile-big" | awk -F'[:,]' '/"events"/ { print $2; exit }' | tr -d ' ')
	for i in 1 2 3; do
		/usr/bin/time -f "%e %M" "$B/goprof" report "$OUT/profile-big" 2>&1 >/dev/null | tail -1
	done | sort -g | sed -n 2p | awk -v n="$n" -v sz="$(cat "$OUT"/profile-big/rank.*.trace | wc -c)" '{
		printf "\ngoprof report of %d events (%.1f MiB, 8 ranks): %.2f s, %.0f MiB peak (median of 3)\n", n, sz / 1048576, $1, $2 / 1024 }'
} | tee "$OUT/profile.txt"
