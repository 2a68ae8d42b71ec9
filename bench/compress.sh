#!/bin/sh
# compress.sh measures gradient compression (compress, through
# strategies/dp's hook) on examples/gpt at 2 data-parallel ranks:
#
#  1. convergence: the same run (a 4-layer GPT, width 128, context 64, 16
#     sequences a step, AdamW, STEPS steps) with each codec and without:
#     final loss, its change against the uncompressed run, bytes each rank
#     sent a step and the compression ratio; the loss curves as an SVG
#     (bench/out/compress.svg, bench/curves);
#  2. throughput: each codec's encoding on one core, GB/s of float32 input
#     (go test -bench in compress).
#
#   bench/compress.sh                 # make bench-compress
#   STEPS=100 CODECS="none fp16 powersgd:4" bench/compress.sh
set -eu
cd "$(dirname "$0")/.."
STEPS=${STEPS:-300}
CODECS=${CODECS:-"none fp16 bf16 topk:0.01 randk:0.01 sign qsgd:16 powersgd:1 powersgd:4"}
PARTS=${PARTS:-"1 2"}
OUT=${OUT:-bench/out}
mkdir -p "$OUT"
GORUN=$OUT/gorun GPT=$OUT/gpt
go build -o "$GORUN" ./cmd/gorun
go build -o "$GPT" ./examples/gpt

if echo "$PARTS" | grep -q 1; then
	echo "# 1. convergence: examples/gpt --dp 2, $STEPS steps (4 layers, width 128, context 64, 16 sequences a step, AdamW lr 1e-3)"
	echo "# codec         final-loss  vs-none   bytes-sent/step  raw/step     ratio"
	curves=""
	: >"$OUT/compress.rows"
	for c in $CODECS; do
		f=$OUT/compress-$(echo "$c" | tr ':' '-').txt
		"$GORUN" -np 2 --timeout 30m "$GPT" --layers 4 --embd 128 --heads 4 --block 64 --batch 16 --microbatches 1 \
			--steps "$STEPS" --lr 1e-3 --compress "$c" >"$f" 2>"$OUT/compress.err" || {
			echo "bench-compress: --compress $c failed:" >&2
			cat "$OUT/compress.err" >&2
			exit 1
		}
		curves="$curves $c=$f"
		awk -v c="$c" '
			$1 == "final" { loss = $3 }
			$1 == "compression" { sent = $4; raw = $9; ratio = $11; sub(/\)$/, "", ratio) }
			END { if (sent == "") { sent = "-"; raw = "-"; ratio = "1.0" }
				printf "%-14s %10s  %s  %15s  %9s  %8s\n", c, loss, "VS", sent, raw, ratio }' "$f" >>"$OUT/compress.rows"
	done
	awk 'NR == 1 { base = $2 } { d = 100 * ($2 - base) / base; sub("VS", sprintf("%+6.2f%%", d)); print }' "$OUT/compress.rows"
	go run ./bench/curves -title "examples/gpt, 2 ranks, loss by codec" -o "$OUT/compress.svg" $curves
	echo "# loss curves: $OUT/compress.svg"
fi

if echo "$PARTS" | grep -q 2; then
	echo "# 2. codec throughput on one core (GB/s of float32 input)"
	GOMAXPROCS=1 go test -run x -bench . -benchtime 2x ./compress/ | awk '/^Benchmark/ { for (i = 1; i <= NF; i++) if ($(i) == "MB/s") printf "%-48s %8.2f GB/s\n", $1, $(i - 1) / 1000 }'
fi
