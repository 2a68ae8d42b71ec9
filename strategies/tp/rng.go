package tp

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"slices"

	"github.com/gorun-hpc/gorun/strategies/nn"
)

// RNG is the tracker of a tensor-parallel model's random streams, as
// Megatron's RNG tracker is: each dropout layer draws from a stream of
// its own name, and the rule for which ranks share a mask is this:
//
//   - In a replicated region (the residual stream without sequence
//     parallelism, the embeddings' output) every rank of the group holds
//     the same activation and must drop the same elements: the rank draws
//     the same mask as every other.
//   - In a split region (the attention probabilities of the rank's heads,
//     the rank's token rows with sequence parallelism) each rank holds
//     different elements, and their masks must be independent: each rank
//     draws from streams no other rank draws from.
//   - Data-parallel replicas draw from the same streams, for the rows
//     of the step's whole batch that they hold.
//
// Megatron meets the rule with two generators, one seeded alike on every
// rank and one offset by the tensor-parallel rank. Here every mask is
// drawn row by row: each Forward takes one key from the layer's stream
// (the same on every rank), and row r of the whole activation is masked
// from a generator seeded with the key and r. A rank of a split region
// draws only its own rows, so no two ranks draw from the same generator,
// and the union of their masks is the mask of the unsplit layer: a model
// trains with dropout on exactly as it does on one rank, whatever the
// tensor-parallel size. With Megatron's offset seed it would not.
//
// A driver that cuts a step's batch into micro-batches, or over
// data-parallel replicas, calls BeginStep at each step: a layer's key
// (Key) is then one per step, drawn at its first Forward of the step, and
// its rows are those of the step's whole batch (Group.SetFirst), so that
// the masks do not depend on how the batch was cut: a replica's rows are
// masked as one rank masks them within the whole batch.
type RNG struct {
	seed    uint64
	streams map[string]*nn.Stream
	step    uint64              // BeginStep's count; 0: a key per Forward
	keys    map[string]*stepKey // per stream, the key of the step
}

// stepKey is the key a stream gave for a step.
type stepKey struct{ step, key uint64 }

// NewRNG returns a tracker whose streams derive from seed; every rank of
// a job passes the same seed.
func NewRNG(seed uint64) *RNG {
	return &RNG{seed: seed, streams: map[string]*nn.Stream{}, keys: map[string]*stepKey{}}
}

// BeginStep starts a step: from now on each stream's Key is drawn once
// per step.
func (r *RNG) BeginStep() { r.step++ }

// Key returns a function that gives the key of the stream of that name
// for a Forward: before any BeginStep a fresh draw each time, after it
// the step's key, drawn at its first call in the step and the same for
// every call in the step (every micro-batch, every activation slot).
func (r *RNG) Key(name string) func() uint64 {
	s := r.Stream(name)
	k, ok := r.keys[name]
	if !ok {
		k = &stepKey{}
		r.keys[name] = k
	}
	return func() uint64 {
		if r.step == 0 {
			return s.Uint64()
		}
		if k.step != r.step {
			k.step, k.key = r.step, s.Uint64()
		}
		return k.key
	}
}

// Stream returns the stream of that name, created at its first use as
// nn.NewStream(seed, name, 0).
func (r *RNG) Stream(name string) *nn.Stream {
	s, ok := r.streams[name]
	if !ok {
		s = nn.NewStream(r.seed, name, 0)
		r.streams[name] = s
	}
	return s
}

// MarshalBinary returns every stream's name and state, for a checkpoint.
func (r *RNG) MarshalBinary() ([]byte, error) {
	names := make([]string, 0, len(r.streams))
	for n := range r.streams {
		names = append(names, n)
	}
	slices.Sort(names)
	var out []byte
	for _, n := range names {
		st, err := r.streams[n].MarshalBinary()
		if err != nil {
			return nil, err
		}
		out = binary.AppendUvarint(out, uint64(len(n)))
		out = append(out, n...)
		out = binary.AppendUvarint(out, uint64(len(st)))
		out = append(out, st...)
	}
	return out, nil
}

// UnmarshalBinary restores the streams MarshalBinary saved; on an error
// it changes none.
func (r *RNG) UnmarshalBinary(b []byte) error {
	restored := map[string]*nn.Stream{}
	for len(b) > 0 {
		name, rest, err := field(b)
		if err != nil {
			return err
		}
		st, rest, err := field(rest)
		if err != nil {
			return err
		}
		s := nn.NewStream(r.seed, string(name), 0)
		if err := s.UnmarshalBinary(st); err != nil {
			return fmt.Errorf("tp: random stream %q: %w", name, err)
		}
		restored[string(name)] = s
		b = rest
	}
	for name, s := range restored {
		*r.Stream(name) = *s
	}
	return nil
}

func field(b []byte) (f, rest []byte, err error) {
	n, k := binary.Uvarint(b)
	if k <= 0 || uint64(len(b)-k) < n {
		return nil, nil, fmt.Errorf("tp: random streams' state is truncated or corrupt")
	}
	return b[k : k+int(n)], b[k+int(n):], nil
}

// Dropout is inverted dropout whose mask is drawn row by row (see RNG):
// each training Forward takes a key, from Key if set (RNG.Key) else from
// Stream, and the mask of local row r comes from a generator seeded with
// the key and Row(r), the row's index in the whole activation. A nil Row
// is the identity: the layer holds every row (a replicated region) of a
// batch that is the whole.
type Dropout struct {
	P      float32
	Stream *nn.Stream
	Key    func() uint64
	Row    func(r int) int

	active bool
	mask   []float32
	y, dx  *nn.Tensor
}

// Params is empty.
func (*Dropout) Params() []*nn.Param { return nil }

// Forward returns x with dropout applied when training and P > 0, else x.
func (d *Dropout) Forward(x *nn.Tensor, train bool) *nn.Tensor {
	d.active = train && d.P > 0
	if !d.active {
		return x
	}
	var key uint64
	if d.Key != nil {
		key = d.Key()
	} else {
		key = d.Stream.Uint64()
	}
	scale := float32(0)
	if d.P < 1 {
		scale = 1 / (1 - d.P)
	}
	n, cols := x.Len(), x.Cols()
	if cap(d.mask) < n {
		d.mask = make([]float32, n)
	}
	d.mask = d.mask[:n]
	var g rand.PCG
	for r := 0; r < n/cols; r++ {
		row := r
		if d.Row != nil {
			row = d.Row(r)
		}
		g.Seed(key, uint64(row))
		for j := range d.mask[r*cols : (r+1)*cols] {
			if float32(g.Uint64()>>40)*0x1p-24 < d.P {
				d.mask[r*cols+j] = 0
			} else {
				d.mask[r*cols+j] = scale
			}
		}
	}
	d.y = nn.Resize(d.y, x.Shape...)
	for i, v := range x.Data {
		d.y.Data[i] = v * d.mask[i]
	}
	return d.y
}

// Backward returns dy through the last Forward's mask.
func (d *Dropout) Backward(dy *nn.Tensor) *nn.Tensor {
	if !d.active {
		return dy
	}
	d.dx = nn.Resize(d.dx, dy.Shape...)
	for i, v := range dy.Data {
		d.dx.Data[i] = v * d.mask[i]
	}
	return d.dx
}

// Mask returns the last training Forward's mask: 0 for a dropped element,
// 1/(1-P) for a kept one; nil if it dropped nothing.
func (d *Dropout) Mask() []float32 {
	if !d.active {
		return nil
	}
	return d.mask
}
