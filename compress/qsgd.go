package compress

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"

	"github.com/gorun-hpc/gorun/spmd"
)

// NewQSGD returns the QSGD codec, "qsgd:<levels>" (Alistarh et al. 2017,
// "QSGD: Communication-Efficient SGD via Gradient Quantization and
// Encoding"): the bucket is cut into blocks of QSGDBlock elements (the
// paper's bucket size d: one norm for millions of elements would round
// almost all of them to level 0), and for each block a rank sends its
// norm ||g||₂ and, for each element, its sign and a level ξ in 0..levels
// drawn by stochastic rounding so that sign·norm·ξ/levels is an
// unbiased estimate of the element (EncodeQSGD, one payload a block:
// Stats.Sent is n plus 4 bytes a block). levels is in 1..MaxQSGDLevels.
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
// uncompressed all-reduce's would be, so that a loss scaler sees it
// (here, the block's).
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
	g      gatherer
}

func (q *qsgd) Name() string { return "qsgd:" + strconv.Itoa(q.levels) + q.g.suffix() }

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
	sz, p := qsgdBlocksSize(n), c.Size()
	wire := reuse(&q.wire, p*sz)
	send := wire[c.Rank()*sz : (c.Rank()+1)*sz]
	rng := qsgdRand(q.seed, c.Rank(), key, step)
	for lo := 0; lo < n; lo += QSGDBlock {
		hi := min(n, lo+QSGDBlock)
		at := lo + 4*(lo/QSGDBlock)
		if err := EncodeQSGD(send[at:at+QSGDSize(hi-lo)], q.levels, buf[lo:hi], rng); err != nil {
			return st, fmt.Errorf("%s: bucket %d: %w", q.Name(), key, err)
		}
	}
	sent, err := q.g.gather(ctx, c, key, send, wire)
	st.Sent = int64(sent)
	if err != nil {
		return st, fmt.Errorf("%s: bucket %d: %w", q.Name(), key, err)
	}
	clear(buf)
	for r := range p {
		payload := wire[r*sz : (r+1)*sz]
		for lo := 0; lo < n; lo += QSGDBlock {
			hi := min(n, lo+QSGDBlock)
			at := lo + 4*(lo/QSGDBlock)
			if err := AddQSGD(buf[lo:hi], payload[at:at+QSGDSize(hi-lo)], q.levels); err != nil {
				return st, fmt.Errorf("%s: bucket %d: rank %d's payload, elements %d to %d: %w", q.Name(), key, r, lo, hi, err)
			}
		}
	}
	return st, nil
}

// QSGDBlock is the number of elements that share a norm in the QSGD
// codec's payload.
const QSGDBlock = 512

// qsgdBlocksSize is the bytes of the codec's payload for n elements: a
// QSGD payload for each block of QSGDBlock elements, back to back.
func qsgdBlocksSize(n int) int { return n + 4*((n+QSGDBlock-1)/QSGDBlock) }

// qsgdRand is the random source of a rank's QSGD encoding of a key's
// step-th bucket.
func qsgdRand(seed uint64, rank, key int, step uint64) *rand.PCG {
	return pcgFor(seed, uint64(rank), uint64(key), step)
}
