package data

import (
	"math/bits"
	"math/rand/v2"
	"sync"
)

// Sampler says which examples of a data set of n make up each global batch,
// and which of them belong to this rank. Batches are addressed by global step
// number: step s belongs to epoch s / StepsPerEpoch(), and within its epoch
// to the (s mod StepsPerEpoch())-th run of globalBatch positions of that
// epoch's order. The order is 0..n-1 without shuffling, and with shuffling a
// permutation drawn from a PCG generator seeded with (seed, epoch), the same
// on every rank and in every Go release. The incomplete batch at the end of
// each epoch is dropped; with shuffling, different examples are dropped in
// different epochs.
//
// A Sampler holds no iterator state, so resuming at a checkpointed step
// draws exactly the batches an uninterrupted run would have drawn. It is
// safe for concurrent use; it caches one epoch's permutation.
type Sampler struct {
	n, global, rank, size int
	seed                  uint64
	shuffle               bool

	mu    sync.Mutex // protects following
	epoch int        // the epoch whose permutation perm holds
	perm  []int      // nil until the first shuffled batch
}

// NewSampler returns the sampler of rank rank in a job of size ranks that
// trains on a data set of n examples with globalBatch examples per step,
// split evenly over the ranks. It fails, with an error that wraps
// ErrArgument and says what to pass instead, if n is not positive, if size
// is not positive or rank is not in [0, size), or if globalBatch is not
// positive, exceeds n, or is not a multiple of size.
func NewSampler(n, globalBatch, rank, size int, seed uint64, shuffle bool) (*Sampler, error) {
	switch {
	case n <= 0:
		return nil, errorf(ErrArgument, "data set of %d examples: the sampler needs at least one", n)
	case size <= 0:
		return nil, errorf(ErrArgument, "job of %d ranks: pass the number of ranks, at least 1", size)
	case rank < 0 || rank >= size:
		return nil, errorf(ErrArgument, "rank %d out of range for %d ranks: pass a rank from 0 to %d", rank, size, size-1)
	case globalBatch <= 0:
		return nil, errorf(ErrArgument, "global batch %d: pass a positive number of examples per step", globalBatch)
	case globalBatch > n:
		return nil, errorf(ErrArgument, "global batch %d exceeds the data set's %d examples: pass at most %d", globalBatch, n, n)
	case globalBatch%size != 0:
		return nil, errorf(ErrArgument, "global batch %d does not split over %d ranks: pass a multiple of %d", globalBatch, size, size)
	}
	return &Sampler{n: n, global: globalBatch, rank: rank, size: size, seed: seed, shuffle: shuffle}, nil
}

// StepsPerEpoch returns the number of full global batches in one pass over
// the data set, n / globalBatch; the incomplete last batch is dropped.
func (s *Sampler) StepsPerEpoch() int { return s.n / s.global }

// GlobalBatch returns the number of examples per step over all ranks.
func (s *Sampler) GlobalBatch() int { return s.global }

// LocalBatch returns the number of examples per step on one rank,
// globalBatch / size.
func (s *Sampler) LocalBatch() int { return s.global / s.size }

// Epoch returns the epoch that global step step belongs to.
func (s *Sampler) Epoch(step int) int {
	e, _ := s.locate(step)
	return e
}

// Global returns the data set indices of the global batch at global step
// step, in the order whose contiguous slices are the ranks' local batches.
// The slice is new and the caller's to keep. A negative step belongs to a
// negative epoch, which is as well defined as any other.
func (s *Sampler) Global(step int) []int {
	return s.positions(step, 0, s.global)
}

// Local returns this rank's part of Global(step): the slice
// [rank*LocalBatch(), (rank+1)*LocalBatch()) of it. The slice is new and the
// caller's to keep.
func (s *Sampler) Local(step int) []int {
	lb := s.LocalBatch()
	return s.positions(step, s.rank*lb, lb)
}

// Micro returns the i-th of k equal micro-batches of Local(step), for
// gradient accumulation: the slice [i*m, (i+1)*m) of it, where
// m = LocalBatch()/k. It fails with an error that wraps ErrArgument if k is
// not positive or does not divide the local batch, or if i is not in
// [0, k).
func (s *Sampler) Micro(step, k, i int) ([]int, error) {
	lb := s.LocalBatch()
	switch {
	case k <= 0:
		return nil, errorf(ErrArgument, "%d micro-batches: pass at least 1", k)
	case lb%k != 0:
		return nil, errorf(ErrArgument, "local batch %d does not split into %d micro-batches: pass a k that divides %d, or a global batch that is a multiple of %d",
			lb, k, lb, k*s.size)
	case i < 0 || i >= k:
		return nil, errorf(ErrArgument, "micro-batch %d out of range for %d micro-batches: pass 0 to %d", i, k, k-1)
	}
	m := lb / k
	return s.positions(step, s.rank*lb+i*m, m), nil
}

// locate returns the epoch of step and the step's number within it,
// rounding toward minus infinity so that every step has one place.
func (s *Sampler) locate(step int) (epoch, within int) {
	spe := s.StepsPerEpoch()
	epoch, within = step/spe, step%spe
	if within < 0 {
		epoch--
		within += spe
	}
	return epoch, within
}

// positions returns count indices of the global batch at step, starting at
// offset off within that batch.
func (s *Sampler) positions(step, off, count int) []int {
	epoch, within := s.locate(step)
	start := within*s.global + off
	out := make([]int, count)
	if !s.shuffle {
		for j := range out {
			out[j] = start + j
		}
		return out
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.perm == nil || s.epoch != epoch {
		s.perm = permute(s.perm, s.n, s.seed, epoch)
		s.epoch = epoch
	}
	copy(out, s.perm[start:start+count])
	return out
}

// permute returns a permutation of 0..n-1 drawn from a PCG generator seeded
// with (seed, epoch), reusing buf if it is large enough. It shuffles with its
// own Fisher-Yates and bounded draw over the PCG's raw output, whose
// sequence math/rand/v2 guarantees, so that checkpoints resume to the same
// order under any Go release.
func permute(buf []int, n int, seed uint64, epoch int) []int {
	if cap(buf) < n {
		buf = make([]int, n)
	}
	p := buf[:n]
	for i := range p {
		p[i] = i
	}
	src := rand.NewPCG(seed, uint64(epoch))
	for i := n - 1; i > 0; i-- {
		j := bounded(src, uint64(i)+1)
		p[i], p[j] = p[j], p[i]
	}
	return p
}

// bounded returns a uniform draw from [0, n), n > 0, by Lemire's
// multiply-and-reject method.
func bounded(src *rand.PCG, n uint64) uint64 {
	hi, lo := bits.Mul64(src.Uint64(), n)
	if lo < n {
		thresh := -n % n
		for lo < thresh {
			hi, lo = bits.Mul64(src.Uint64(), n)
		}
	}
	return hi
}
