package zero

import (
	"fmt"
	"unsafe"

	"github.com/gorun-hpc/gorun/compress"
)

// Memory is what a rank holds for its model, in bytes: the parameters,
// gradients and optimizer state it keeps between steps (the master copy
// of mixed precision counts as optimizer state, as the ZeRO paper counts
// it), the temporaries it holds for gathered parameters, gradients in
// flight and fp32 working copies (its pool, in use or not), and the peak
// of their sum since the driver was made.
type Memory struct {
	Params, Grads, Optim, Temp, Peak int64
}

// Total is what the rank holds now.
func (m Memory) Total() int64 { return m.Params + m.Grads + m.Optim + m.Temp }

// String is examples/zero's line, without the rank.
func (m Memory) String() string {
	return fmt.Sprintf("params %d grads %d optim %d peak %d", m.Params, m.Grads, m.Optim, m.Peak)
}

// pool keeps the temporaries of a driver, by length, for reuse: a step
// asks for the same buffers in the same order each time. Every buffer
// it has made counts in the accounting until the driver is closed.
type pool struct {
	f32 freeList[float32]
	u16 freeList[compress.BF16]
	mem *Memory
}

func newPool(mem *Memory) *pool {
	return &pool{f32: freeList[float32]{}, u16: freeList[compress.BF16]{}, mem: mem}
}

// freeList holds the free buffers of one element type by length.
type freeList[T float32 | compress.BF16] map[int][][]T

// get returns a buffer of n elements, zeroed if zero is set, and counts a
// new one's bytes in mem.
func (l freeList[T]) get(n int, zero bool, mem *Memory) []T {
	if free := l[n]; len(free) > 0 {
		b := free[len(free)-1]
		l[n] = free[:len(free)-1]
		if zero {
			clear(b)
		}
		return b
	}
	var t T
	mem.Temp += int64(n) * int64(unsafe.Sizeof(t))
	mem.Peak = max(mem.Peak, mem.Total())
	return make([]T, n)
}

func (l freeList[T]) put(b []T) {
	if b != nil {
		l[len(b)] = append(l[len(b)], b)
	}
}

func (p *pool) get32(n int, zero bool) []float32       { return p.f32.get(n, zero, p.mem) }
func (p *pool) put32(b []float32)                      { p.f32.put(b) }
func (p *pool) get16(n int, zero bool) []compress.BF16 { return p.u16.get(n, zero, p.mem) }
func (p *pool) put16(b []compress.BF16)                { p.u16.put(b) }
