package nn

import (
	"hash/fnv"
	"math/rand/v2"
)

// Stream is a named, seeded random stream (PCG) whose state can be saved
// and restored, so that dropout masks and initial weights are reproducible
// per rank and a resumed job draws what an uninterrupted one would.
//
// Streams are named: "init/fc1.weight", "dropout". The index tells apart
// the streams that must differ between ranks; Megatron's rule for tensor
// parallelism (one dropout stream shared by a tensor-parallel group in
// replicated regions, one per rank in split regions) picks the index.
type Stream struct {
	*rand.Rand
	pcg *rand.PCG
}

// NewStream returns the stream named name with index i under seed.
func NewStream(seed uint64, name string, i int) *Stream {
	h := fnv.New64a()
	h.Write([]byte(name))
	a := splitmix(seed ^ h.Sum64())
	b := splitmix(a ^ uint64(i)*0x9e3779b97f4a7c15)
	pcg := rand.NewPCG(a, b)
	return &Stream{Rand: rand.New(pcg), pcg: pcg}
}

// MarshalBinary returns the stream's state.
func (s *Stream) MarshalBinary() ([]byte, error) { return s.pcg.MarshalBinary() }

// UnmarshalBinary restores a state that MarshalBinary returned.
func (s *Stream) UnmarshalBinary(b []byte) error { return s.pcg.UnmarshalBinary(b) }

func splitmix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}
