package compress

import (
	"fmt"

	"github.com/gorun-hpc/gorun/prims/kernel"
)

// Residuals is the error-feedback memory of a biased compressor (Seide et
// al. 2014, Karimireddy et al. 2019): for each bucket key, the part of
// the key's last compressed vector that the codec did not send. A codec
// with error feedback compresses p = g + residual instead of the
// gradient g and keeps p minus what it sent as the next residual, so
// that nothing of the gradient is lost, only delayed.
//
// The protocol of one step of bucket key is:
//
//	res, err := r.Apply(key, buf) // buf is now p = g + residual
//	... choose what to send from buf ...
//	... write p - sent into res (or leave res alone to skip the step) ...
//
// The zero Residuals is empty and ready to use. A Residuals is used by
// one goroutine at a time, as its codec is.
type Residuals struct {
	m map[int][]float32
}

// Apply adds key's residual into buf, element by element in float32,
// making buf the vector p that the codec compresses, and returns the
// residual's storage, of buf's length, for the caller to overwrite with
// the part of p it does not send. A key seen for the first time has a
// zero residual: buf is left alone and the storage returned is zeroed.
//
// Apply does not change the storage: until the caller writes to it, it
// holds the residual that went into buf. A codec that skips a step (a
// bucket with a NaN or an Inf, whose gradient the optimizer throws away)
// leaves it, and the residual is the same at the next step.
//
// A key names one bucket: Apply fails, changing nothing, if buf's length
// is not the length of the key's residual.
func (r *Residuals) Apply(key int, buf []float32) ([]float32, error) {
	res, ok := r.m[key]
	if !ok {
		if r.m == nil {
			r.m = make(map[int][]float32)
		}
		res = make([]float32, len(buf))
		r.m[key] = res
		return res, nil
	}
	if len(res) != len(buf) {
		return nil, fmt.Errorf("error feedback: bucket %d has %d elements, but its residual from the last step has %d: "+
			"a key must name the same bucket at every step; after changing the buckets, make a new codec (its residuals start from zero), "+
			"and resume a saved codec state only with the buckets it was saved with", key, len(buf), len(res))
	}
	kernel.AddF32(buf, res)
	return res, nil
}

// Residual returns key's residual, the store's own slice, or nil if the
// key has none.
func (r *Residuals) Residual(key int) []float32 { return r.m[key] }

// Reset forgets key's residual: the key's next Apply starts from zero.
func (r *Residuals) Reset(key int) { delete(r.m, key) }

// Bytes is the memory the residuals take, 4 bytes an element.
func (r *Residuals) Bytes() int64 {
	var n int64
	for _, res := range r.m {
		n += 4 * int64(len(res))
	}
	return n
}
