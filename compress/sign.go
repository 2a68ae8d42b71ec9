package compress

import (
	"context"
	"fmt"
	"math"

	"github.com/gorun-hpc/gorun/spmd"
)

// NewSign returns the EF-SignSGD codec, "sign" (Karimireddy et al. 2019,
// "Error Feedback Fixes SignSGD and other Gradient Compression
// Schemes"): of p = gradient + residual it sends scale·sign(p), scale the
// mean magnitude of the bucket's p, as a bit an element and one float32
// (SignSize: Stats.Sent is ⌈n/8⌉+4 bytes), and keeps p - scale·sign(p) as
// the residual. sign(0) = sign(-0) = +1.
//
// The new residual is p - scale·sign(p) rounded to float32, so what was
// sent plus the residual is p within half a unit in the last place of
// the residual, and exactly p wherever scale/2 <= |p| <= 2·scale
// (Sterbenz's lemma). It cannot be exact everywhere: with p = 1e-10 and
// scale = 1 no float32 r has r + 1 = 1e-10; that would take a wider or
// two-part residual, twice the memory.
//
// The ranks all-gather their payloads and each rank adds every rank's
// decoded vector, in rank order, into a zeroed bucket, so that every
// rank has the same bits. A bucket whose p has a NaN or an Inf sends the
// scale NaNScale, which makes the whole sum NaN on every rank so that a
// loss scaler sees the overflow, and leaves the residual as it was.
func NewSign() Codec { return &signSGD{} }

// signSGD is the EF-SignSGD codec.
type signSGD struct {
	ef   Residuals
	wire []byte
	g    gatherer
}

func (s *signSGD) Name() string { return "sign" + s.g.suffix() }

func (s *signSGD) AllReduce(ctx context.Context, c *spmd.Comm, key int, buf []float32, _ []Segment) (Stats, error) {
	n := len(buf)
	st := Stats{Raw: 4 * int64(n)}
	if n == 0 {
		return st, nil
	}
	res, err := s.ef.Apply(key, buf)
	if err != nil {
		return st, fmt.Errorf("sign: %w", err)
	}
	sz, p := SignSize(n), c.Size()
	wire := reuse(&s.wire, p*sz)
	send := wire[c.Rank()*sz : (c.Rank()+1)*sz]
	scale := meanAbs(buf)
	if math.IsNaN(scale) || math.IsInf(scale, 0) {
		encodeSign(send, float32(math.NaN()), buf, nil)
	} else {
		encodeSign(send, float32(scale), buf, res)
	}
	sent, err := s.g.gather(ctx, c, key, send, wire)
	st.Sent = int64(sent)
	if err != nil {
		return st, fmt.Errorf("%s: bucket %d: %w", s.Name(), key, err)
	}
	clear(buf)
	for r := range p {
		if err := AddSign(buf, wire[r*sz:(r+1)*sz]); err != nil {
			return st, fmt.Errorf("sign: bucket %d: rank %d's payload: %w", key, r, err)
		}
	}
	return st, nil
}

// meanAbs is the mean of |p[i]|, summed in float64 (no float32 overflow,
// and NaN or +Inf if p has a NaN or an Inf). p is not empty.
func meanAbs(p []float32) float64 {
	var s0, s1, s2, s3 float64
	i := 0
	for ; i+4 <= len(p); i += 4 {
		q := p[i : i+4 : i+4]
		s0 += math.Abs(float64(q[0]))
		s1 += math.Abs(float64(q[1]))
		s2 += math.Abs(float64(q[2]))
		s3 += math.Abs(float64(q[3]))
	}
	for _, x := range p[i:] {
		s0 += math.Abs(float64(x))
	}
	return (s0 + s1 + s2 + s3) / float64(len(p))
}
