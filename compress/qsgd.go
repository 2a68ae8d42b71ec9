package compress

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"

	"github.com/gorun-hpc/gorun/prims"
	"github.com/gorun-hpc/gorun/spmd"
)

// NewQSGD returns the QSGD codec, "qsgd:<levels>" (Alistarh et al. 2017,
// "QSGD: Communication-Efficient SGD via Gradient Quantization and
// Encoding"): each rank sends its bucket's norm ||g||₂ and, for each
// element, its sign and a level ξ in 0..levels drawn by stochastic
// rounding so that sign·norm·ξ/levels is an unbiased estimate of the
// element (EncodeQSGD; QSGDSize: Stats.Sent is n+4 bytes). levels is in
// 1..MaxQSGDLevels.
//
// QSGD has no error feedback: its estimate is unbiased, so the errors
// average out over steps and ranks instead of piling up as a biased
// compressor's do. The random bits come from a PCG seeded by seed, the
// rank, the bucket key and the number of steps of that key so far: a run
// is reproducible, and ranks draw independently.
//
// The ranks all-gather their payloads and each rank adds every rank's
// decoded vector, in rank order, into a zeroed bucket, so that every
// rank has the same bits. A bucket with a NaN or an Inf sends the norm
// NaNScale, which makes the whole sum NaN on every rank, as an
// uncompressed all-reduce's would be, so that a loss scaler sees it.
func NewQSGD(levels int, seed uint64) (Codec, error) {
	if levels < 1 || levels > MaxQSGDLevels {
		return nil, fmt.Errorf("qsgd: %d levels out of range: want 1 to %d (a level and the sign share a byte), such as qsgd:8", levels, MaxQSGDLevels)
	}
	return &qsgd{levels: levels, seed: seed}, nil
}

// qsgd is the QSGD codec.
type qsgd struct {
	levels int
	seed   uint64
	steps  map[int]uint64
	wire   []byte
}

func (q *qsgd) Name() string { return "qsgd:" + strconv.Itoa(q.levels) }

func (q *qsgd) AllReduce(ctx context.Context, c *spmd.Comm, key int, buf []float32, _ []Segment) (Stats, error) {
	n := len(buf)
	st := Stats{Raw: 4 * int64(n)}
	if n == 0 {
		return st, nil
	}
	if q.steps == nil {
		q.steps = make(map[int]uint64)
	}
	step := q.steps[key]
	q.steps[key]++
	sz, p := QSGDSize(n), c.Size()
	wire := reuse(&q.wire, p*sz)
	send := wire[c.Rank()*sz : (c.Rank()+1)*sz]
	rng := qsgdRand(q.seed, c.Rank(), key, step)
	if err := EncodeQSGD(send, q.levels, buf, rng); err != nil {
		return st, fmt.Errorf("%s: bucket %d: %w", q.Name(), key, err)
	}
	st.Sent = int64(sz)
	if err := prims.AllGather(ctx, c, send, wire); err != nil {
		return st, fmt.Errorf("%s: bucket %d: %w", q.Name(), key, err)
	}
	clear(buf)
	for r := range p {
		if err := AddQSGD(buf, wire[r*sz:(r+1)*sz], q.levels); err != nil {
			return st, fmt.Errorf("%s: bucket %d: rank %d's payload: %w", q.Name(), key, r, err)
		}
	}
	return st, nil
}

// qsgdRand is the random source of a rank's QSGD encoding of a key's
// step-th bucket.
func qsgdRand(seed uint64, rank, key int, step uint64) *rand.PCG {
	return pcgFor(seed, uint64(rank), uint64(key), step)
}
