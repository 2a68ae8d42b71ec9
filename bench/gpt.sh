#!/bin/sh
# gpt.sh measures examples/gpt's model parallelism (strategies/hybrid):
#
#  1. the pipeline bubble, measured from the trace (gorun --profile, goprof
#     report's Pipeline section: the share of each step's schedule span the
#     ranks did not compute, the median over steps), against (p-1)/(m+p-1) for GPipe and
#     1F1B and that divided by v for interleaving, at p = 2 and 4 and
#     m = 1, 2, 4, 8, 16, a model of 8 equal blocks (whose first and last
#     stages also run the small embeddings and head);
#  2. the peak activation memory of stage 0 (its activation slots' bytes
#     at most in flight), GPipe against 1F1B, from the same runs;
#  3. tensor parallelism's collectives per transformer layer, counted from
#     a trace (gorun --profile, goprof report): all-reduces at tp 2, and
#     all-gathers and reduce-scatters with --seq-parallel;
#  4. tokens/s of each TP x PP x DP layout at NP ranks (8), beside the
#     planner's modelled step time for it (gpt --plan), with the rank
#     correlation of the two orders and how far the planner's first choice
#     is from the fastest measured.
#
#   bench/gpt.sh                        # make bench-gpt
#   PARTS="1 2" bench/gpt.sh            # only the bubble and memory
#   GORUN=devrun/bin/gorun GPT=devrun/bin/gpt GOPROF=devrun/bin/goprof DATA=strategies bench/gpt.sh
set -eu
cd "$(dirname "$0")/.."
PARTS=${PARTS:-"1 2 3 4"}
NP=${NP:-8}
STEPS=${STEPS:-6}
OUT=${OUT:-bench/out}
DATA=${DATA:-}
mkdir -p "$OUT"
if [ -z "${GORUN:-}" ] || [ -z "${GPT:-}" ] || [ -z "${GOPROF:-}" ]; then
	GORUN=$OUT/gorun GPT=$OUT/gpt GOPROF=$OUT/goprof
	go build -o "$GORUN" ./cmd/gorun
	go build -o "$GPT" ./examples/gpt
	go build -o "$GOPROF" ./cmd/goprof
fi
MODEL="--layers 8 --heads 4 --embd 128 --block 64 ${DATA:+--data $DATA}"

# gpt NP FLAGS...: run examples/gpt, output in $OUT/gpt.run; with PROF set,
# traced into $OUT/gpt.prof.
gpt() {
	np=$1
	shift
	rm -rf "$OUT/gpt.prof"
	"$GORUN" ${PROF:+--profile "$OUT/gpt.prof"} -np "$np" --timeout 10m "$GPT" $MODEL "$@" >"$OUT/gpt.run" 2>"$OUT/gpt.err" || {
		echo "bench-gpt: np $np $* failed:" >&2
		cat "$OUT/gpt.err" >&2
		exit 1
	}
}

if echo "$PARTS" | grep -q 1; then
	echo "# 1-2. pipeline bubble (from the trace, median step / formula) and stage 0's peak activation memory (bytes), micro-batches of 2"
	echo "# sequences of 64 tokens, $STEPS steps, the first left out"
	echo "# simulated: the schedule run by pipe.Simulate with each chunk's measured mean forward and backward times"
	echo "# p  m  schedule      bubble  formula  simulated  stage0-inflight  stage0-activations"
	for p in 2 4; do
		for m in 1 2 4 8 16; do
			for s in gpipe 1f1b interleaved; do
				v=1
				if [ "$s" = interleaved ]; then
					[ $((m % p)) -eq 0 ] || continue
					v=2
				fi
				PROF=1 gpt "$p" --pp "$p" --batch $((2 * m)) --microbatches "$m" --schedule "$s" --virtual "$v" --steps "$STEPS" --stats
				"$GOPROF" report "$OUT/gpt.prof" >"$OUT/gpt.report"
				b=$(awk '$1 == "span" && $5 == "bubble" { sub(/%\)$/, "", $NF); print $NF }' "$OUT/gpt.report")
				awk -v p="$p" -v m="$m" -v s="$s" -v b="$b" '
					$1 == "stage" { f = $10 + 0; sim = $12 + 0; if ($2 == 0) { inflight = $4; act = $6 } }
					END { printf "%-2d %-2d %-12s %6.1f%%  %6.1f%%  %8.1f%%  %15d  %18d\n", p, m, s, b, f, sim, inflight, act }' "$OUT/gpt.run"
			done
		done
	done
fi

if echo "$PARTS" | grep -q 3; then
	echo "# 3. tensor-parallel collectives per step and rank, counted from the trace (8 layers, 1 micro-batch)"
	for sp in "" --seq-parallel; do
		rm -rf "$OUT/gpt.prof"
		"$GORUN" --profile "$OUT/gpt.prof" -np 2 "$GPT" $MODEL --batch 16 --tp 2 --microbatches 1 --steps 1 $sp >"$OUT/gpt.run" 2>"$OUT/gpt.err"
		"$GOPROF" report "$OUT/gpt.prof" >"$OUT/gpt.report"
		awk -v sp="${sp:-plain}" '/^Call sites/ { on = 1; next } /^Regions/ { on = 0 }
			on && $1 ~ /^tp\./ { calls[$3] += $4 / 2 }
			END { for (op in calls) printf "%s: %s %d a rank\n", sp, op, calls[op] }' "$OUT/gpt.report" | sort
	done
	echo "# Megatron's count: 2 all-reduces forward and 2 backward per layer = 32 for 8 layers, plus the embedding's"
	echo "# all-reduce, the cross-entropy's 3 and the head's input gradient: 37 (with sequence parallelism each"
	echo "# all-reduce of a layer is an all-gather and a reduce-scatter, and the LayerNorms' gradients add one all-reduce a layer)"
fi

if echo "$PARTS" | grep -q 4; then
	echo "# 4. layouts at np $NP: measured tokens/s (median of steps after the first) beside the planner's model"
	gpt "$NP" --plan --top 1000 --batch 32 --microbatches 4
	cp "$OUT/gpt.run" "$OUT/gpt.plan"
	head -1 "$OUT/gpt.plan"
	: >"$OUT/gpt.layouts"
	for l in 1:1:8 2:1:4 4:1:2 1:2:4 2:2:2 4:2:1 1:4:2 2:4:1 1:8:1; do
		tp=${l%%:*} rest=${l#*:} pp=${rest%%:*} dp=${rest#*:}
		gpt "$NP" --tp "$tp" --pp "$pp" --dp "$dp" --batch 32 --microbatches 4 --steps "$STEPS"
		meas=$(awk '$1 == "step" && $2 > 1 { print $6 }' "$OUT/gpt.run" | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }')
		name="tp$tp pp$pp dp$dp zero0 m4 1f1b"
		model=$(awk -v n="$name" '{ l = $2 " " $3 " " $4 " " $5 " " $6 " " $7 } l == n && $8 ~ /^[0-9.]+$/ { print $9; exit }' "$OUT/gpt.plan")
		echo "$name $meas $model" >>"$OUT/gpt.layouts"
	done
	echo "# layout                          measured-tokens/s  model-tokens/s"
	awk '{ printf "%-32s %17s %15s\n", $1 " " $2 " " $3 " " $4 " " $5 " " $6, $7, $8 }' "$OUT/gpt.layouts"
	awk '{ n++; meas[n] = $7; mod[n] = $8; name[n] = $1 " " $2 " " $3 }
		function rank(a, i,   j, r) { r = 1; for (j = 1; j <= n; j++) if (a[j] > a[i]) r++; return r }
		END {
			for (i = 1; i <= n; i++) { d = rank(meas, i) - rank(mod, i); s += d * d
				if (rank(mod, i) == 1) first = i; if (rank(meas, i) == 1) best = i }
			printf "Spearman rank correlation %.2f over %d layouts; planner first: %s at %s tokens/s, fastest measured: %s at %s (%.0f%% of it)\n",
				1 - 6 * s / (n * (n * n - 1)), n, name[first], meas[first], name[best], meas[best], 100 * meas[first] / meas[best] }' "$OUT/gpt.layouts"
fi
