package main

import (
	"fmt"
	"strings"
	"testing"
)

// simulate performs op naively over every rank's buffers, the way a
// correct collective would leave them.
func simulate[T elem](bs []*bufs[T]) {
	p := len(bs)
	b0 := bs[0]
	switch b0.op {
	case "allreduce", "reduce":
		out := make([]T, b0.count)
		for i := range out {
			out[i] = b0.reduced(i)
		}
		for r, b := range bs {
			if b.op == "allreduce" || r == 0 {
				copy(b.recv, out)
			}
		}
	case "broadcast":
		for _, b := range bs[1:] {
			copy(b.recv, b0.send)
		}
	case "allgather", "gather":
		for r, b := range bs {
			if b.op == "gather" && r != 0 {
				continue
			}
			for q := range p {
				copy(b.recv[q*b.blk:], bs[q].send)
			}
		}
	case "reducescatter":
		for r, b := range bs {
			for j := range b.recv {
				b.recv[j] = b.reduced(r*b.blk + j)
			}
		}
	case "alltoall":
		for r, b := range bs {
			for s := range p {
				copy(b.recv[s*b.blk:(s+1)*b.blk], bs[s].send[r*b.blk:])
			}
		}
	case "scatter":
		for r, b := range bs {
			copy(b.recv, b0.send[r*b.blk:])
		}
	}
}

func TestVerify(t *testing.T) {
	for _, op := range opNames {
		for _, redop := range []string{"sum", "prod", "max", "min"} {
			for _, p := range []int{1, 3, 8} {
				t.Run(fmt.Sprintf("%s/%s/%d", op, redop, p), func(t *testing.T) {
					testVerify[float32](t, op, redop, p)
					testVerify[uint8](t, op, redop, p)
					testVerify[int64](t, op, redop, p)
				})
			}
		}
	}
}

func testVerify[T elem](t *testing.T, op, redop string, p int) {
	const count = 24
	bs := make([]*bufs[T], p)
	for r := range bs {
		bs[r] = newBufs[T](nil, op, r, p, count, redop)
		bs[r].fill()
	}
	simulate(bs)
	for r, b := range bs {
		if w := b.verify(); w != 0 {
			t.Errorf("%T rank %d: %d wrong after a correct %s", T(0), r, w, op)
		}
	}
	// A result left unwritten is caught on every rank that gets one.
	for r := range bs {
		bs[r].fill()
	}
	if p == 1 && (op == "broadcast" || op == "allreduce" || op == "reduce") {
		return // in place: the input is the result
	}
	last := bs[p-1] // rank 0 of broadcast and scatter holds its result already
	if op == "reduce" || op == "gather" {
		last = bs[0]
	}
	if w := last.verify(); w == 0 {
		t.Errorf("%T rank %d: no wrong elements in a %s that did nothing", T(0), last.rank, op)
	}
}

func TestBusFactor(t *testing.T) {
	tests := []struct {
		op   string
		n    int
		want float64
	}{
		{"allreduce", 4, 1.5},
		{"allgather", 4, 0.75},
		{"reducescatter", 8, 0.875},
		{"alltoall", 2, 0.5},
		{"broadcast", 8, 1},
		{"reduce", 8, 1},
	}
	for _, tt := range tests {
		if got := busFactor(tt.op, tt.n); got != tt.want {
			t.Errorf("busFactor(%s, %d) = %g, want %g", tt.op, tt.n, got, tt.want)
		}
	}
}

// TestForOp: with several ops, the algorithms an op lacks are skipped for
// it and listed; with one op they stay, for its error to name them.
func TestForOp(t *testing.T) {
	cfg := config{ops: []string{"allreduce", "broadcast"}, algos: []string{"rabenseifner", "ring", ""}}
	got, skipped := cfg.forOp("broadcast")
	if strings.Join(got.algos, ",") != "ring," || strings.Join(skipped, ",") != "rabenseifner" {
		t.Errorf("broadcast: algos %q skipped %q, want ring and auto, rabenseifner skipped", got.algos, skipped)
	}
	if got, skipped := cfg.forOp("allreduce"); len(got.algos) != 3 || skipped != nil {
		t.Errorf("allreduce: algos %q skipped %q, want all three", got.algos, skipped)
	}
	one := config{ops: []string{"broadcast"}, algos: []string{"rabenseifner"}}
	if got, skipped := one.forOp("broadcast"); len(got.algos) != 1 || skipped != nil {
		t.Errorf("one op: algos %q skipped %q, want rabenseifner kept", got.algos, skipped)
	}
}
