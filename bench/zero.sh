#!/bin/sh
# zero.sh measures strategies/zero against DDP, in one run, taking turns:
# examples/zero with --ddp (strategies/dp) and with ZeRO stages 1, 2 and 3
# (prefetch on and off), on the MLP (784-1024-1024-10, batch 64 per rank)
# and the GPT of examples/ddp (4 layers, dim 128, context 64, batch 8 per
# rank), AdamW. It prints the median step time of each and its ratio to
# DDP's of the same round. Then, unless MEM=0, the memory table: a
# 50M-parameter MLP (1024 wide, 48 layers) at 4 ranks, each stage in fp32
# and bf16, one step: what each rank holds by zero.Memory's account, its
# peak, and its Go heap in use after a collection, beside the ZeRO
# paper's formula.
#
#   bench/zero.sh                      # make bench-zero: np 2 and 4, 3 rounds
#   NPS=2 REPS=5 MEM=0 bench/zero.sh
#   GORUN=devrun/bin/gorun ZERO=devrun/bin/zero DATA=strategies bench/zero.sh   # prebuilt, no Go
#
# The GPT reads DATA (text files or directories; default: the Go
# distribution's source, which a machine without Go lacks).
set -eu
cd "$(dirname "$0")/.."
NPS=${NPS:-"2 4"}
REPS=${REPS:-3}
STEPS=${STEPS:-30}
SKIP=${SKIP:-5}
MEM=${MEM:-1}
OUT=${OUT:-bench/out}
mkdir -p "$OUT"
DATA=${DATA:-}
if [ -z "${GORUN:-}" ] || [ -z "${ZERO:-}" ]; then
	GORUN=$OUT/gorun ZERO=$OUT/zero
	go build -o "$GORUN" ./cmd/gorun
	go build -o "$ZERO" ./examples/zero
fi

median() {
	sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print "nan"; else printf "%.2f\n", NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

# step NP MODEL FLAGS...: the median ms per step of one run.
step() {
	np=$1 model=$2
	shift 2
	if [ "$model" = mlp ]; then
		set -- --model mlp --batch $((64 * np)) "$@"
		batch=$((64 * np))
	else
		set -- --model gpt --layers 4 --dim 128 --heads 4 --context 64 --batch $((8 * np)) ${DATA:+--data "$DATA"} "$@"
		batch=$((8 * np))
	fi
	"$GORUN" -np "$np" --timeout 10m "$ZERO" --steps "$STEPS" --optim adamw --lr 1e-3 "$@" >"$OUT/zero.run" 2>"$OUT/zero.err" || {
		echo "bench-zero: np $np $model $* failed:" >&2
		cat "$OUT/zero.err" >&2
		exit 1
	}
	awk -v skip="$SKIP" -v batch="$batch" '$1 == "step" && $2 > skip { print 1000 * batch / $6 }' "$OUT/zero.run" | median
}

MODES="ddp:--ddp z1:--zero=1 z2:--zero=2 z3:--zero=3 z3-noprefetch:--zero=3,--no-prefetch"
: >"$OUT/zero.raw"
for np in $NPS; do
	for model in mlp gpt; do
		for rep in $(seq "$REPS"); do
			for m in $MODES; do
				name=${m%%:*}
				flags=$(echo "${m#*:}" | tr ',' ' ')
				# shellcheck disable=SC2086
				echo "$np $model $rep $name $(step "$np" "$model" $flags)" >>"$OUT/zero.raw"
			done
		done
	done
done

echo "step time, median ms (ratio to DDP, the medians of the same rounds)"
printf '%-4s %-4s' np model
for m in $MODES; do printf ' %22s' "${m%%:*}"; done
echo
for np in $NPS; do
	for model in mlp gpt; do
		printf '%-4s %-4s' "$np" "$model"
		ddp=$(awk -v np="$np" -v m="$model" '$1 == np && $2 == m && $4 == "ddp" { print $5 }' "$OUT/zero.raw" | median)
		for m in $MODES; do
			name=${m%%:*}
			t=$(awk -v np="$np" -v m="$model" -v n="$name" '$1 == np && $2 == m && $4 == n { print $5 }' "$OUT/zero.raw" | median)
			printf ' %14s (%5.2fx)' "$t" "$(echo "$t $ddp" | awk '{ print $1 / $2 }')"
		done
		echo
	done
done

[ "$MEM" = 1 ] || exit 0
echo
echo "memory per rank, 50M-parameter MLP (784-1024x48-10, AdamW), 4 ranks, MiB: rank 0's account and every rank's Go heap"
printf '%-16s %9s %9s %9s %9s %9s %11s %11s\n' config params grads optim peak formula "heap min" "heap max"
for mixed in none bf16; do
	for stage in 0 1 2 3; do
		"$GORUN" -np 4 --timeout 10m "$ZERO" --zero "$stage" --mixed "$mixed" --steps 1 --optim adamw --lr 1e-3 \
			--hidden "$(seq 48 | sed 's/.*/1024/' | paste -sd, -)" --examples 256 --batch 16 >"$OUT/zero.run" 2>"$OUT/zero.err" || {
			echo "bench-zero: memory run stage $stage $mixed failed:" >&2
			cat "$OUT/zero.err" >&2
			exit 1
		}
		awk -v stage="$stage" -v mixed="$mixed" '
			$1 == "memory" { r = $3; p[r] = $5; g[r] = $7; o[r] = $9; k[r] = $11; h[r] = $13; n++ }
			END {
				# Psi from the parameters of rank 0: pb bytes each, a quarter of them at stage 3
				pb = mixed == "bf16" ? 2 : 4; gb = pb; ob = mixed == "bf16" ? 12 : 8
				psi = p[0] / pb * (stage == 3 ? 4 : 1)
				if (stage == 0) f = (pb + gb + ob) * psi
				if (stage == 1) f = (pb + gb) * psi + ob * psi / 4
				if (stage == 2) f = pb * psi + (gb + ob) * psi / 4
				if (stage == 3) f = (pb + gb + ob) * psi / 4
				lo = h[0]; hi = h[0]
				for (r in h) { if (h[r] < lo) lo = h[r]; if (h[r] > hi) hi = h[r] }
				M = 1048576
				printf "%-16s %9.1f %9.1f %9.1f %9.1f %9.1f %11.1f %11.1f\n", "zero-" stage " " mixed, p[0] / M, g[0] / M, o[0] / M, k[0] / M, f / M, lo / M, hi / M
			}' "$OUT/zero.run"
	done
done
