package zero

import (
	"fmt"

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
	f32  map[int][][]float32
	u16  map[int][][]compress.BF16
	mem  *Memory
	temp int64
}

func newPool(mem *Memory) *pool {
	return &pool{f32: map[int][][]float32{}, u16: map[int][][]compress.BF16{}, mem: mem}
}

func (p *pool) grow(bytes int) {
	p.mem.Temp += int64(bytes)
	p.mem.Peak = max(p.mem.Peak, p.mem.Total())
}

// get32 returns a buffer of n float32s, zeroed if zero is set.
func (p *pool) get32(n int, zero bool) []float32 {
	if l := p.f32[n]; len(l) > 0 {
		b := l[len(l)-1]
		p.f32[n] = l[:len(l)-1]
		if zero {
			clear(b)
		}
		return b
	}
	p.grow(4 * n)
	return make([]float32, n)
}

func (p *pool) put32(b []float32) {
	if b != nil {
		p.f32[len(b)] = append(p.f32[len(b)], b)
	}
}

func (p *pool) get16(n int, zero bool) []compress.BF16 {
	if l := p.u16[n]; len(l) > 0 {
		b := l[len(l)-1]
		p.u16[n] = l[:len(l)-1]
		if zero {
			clear(b)
		}
		return b
	}
	p.grow(2 * n)
	return make([]compress.BF16, n)
}

func (p *pool) put16(b []compress.BF16) {
	if b != nil {
		p.u16[len(b)] = append(p.u16[len(b)], b)
	}
}
