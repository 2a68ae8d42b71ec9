package main

// bufs holds one rank's buffers for one collective and knows, from the
// deterministic inputs of every rank, what the result must be.
type bufs[T elem] struct {
	op, redop  string
	rank, p    int
	count, blk int // elements of the whole buffer, of one rank's block
	send, recv []T // for the in-place collectives both are the one buffer
}

// newBufs lays out op's buffers in mem, which it grows as needed (nil:
// fresh memory).
func newBufs[T elem](mem *arena[T], op string, rank, p, count int, redop string) *bufs[T] {
	if mem == nil {
		mem = new(arena[T])
	}
	b := &bufs[T]{op: op, redop: redop, rank: rank, p: p, count: count, blk: count / p}
	switch op {
	case "allreduce", "broadcast", "reduce":
		b.send = mem.first(count)
		b.recv = b.send
	case "allgather", "gather":
		b.send, b.recv = mem.first(b.blk), mem.second(count)
	case "reducescatter", "scatter":
		b.send, b.recv = mem.first(count), mem.second(b.blk)
	case "alltoall":
		b.send, b.recv = mem.first(count), mem.second(count)
	}
	return b
}

// arena is the memory that the buffers of every size share, as
// nccl-tests and bench/mpi/coll.c allocate theirs once, at the largest
// size, and reuse it. Fresh buffers for each size made every size's
// warm-up fault its pages in and gave the garbage collector the last
// size's to free while the next one ran; a program that trains reuses
// its buffers too.
type arena[T elem] struct{ a, b []T }

// first returns n elements of the first buffer, second of the second.
func (m *arena[T]) first(n int) []T  { return grow(&m.a, n) }
func (m *arena[T]) second(n int) []T { return grow(&m.b, n) }

func grow[T elem](s *[]T, n int) []T {
	if cap(*s) < n {
		*s = make([]T, n)
	}
	return (*s)[:n]
}

// reserve allocates both buffers at n elements up front, so that a sweep
// of growing sizes does not allocate again at each.
func (m *arena[T]) reserve(n int) { m.a, m.b = make([]T, 0, n), make([]T, 0, n) }

// input is the value rank r contributes at position i: small positive
// integers, so that every reduction is exact in every type and in any
// order (products of ones and twos; uint8 wraps the same either way).
// Collectives that do not reduce get distinct values whatever the redop.
func (b *bufs[T]) input(r, i int) T {
	if b.redop == "prod" && reduces(b.op) {
		return T(1 + (r+i)%2)
	}
	return T((r*131+i*7)%13 + 1)
}

// reduced is the reduction over all ranks of their inputs at position i.
func (b *bufs[T]) reduced(i int) T {
	acc := b.input(0, i)
	for r := 1; r < b.p; r++ {
		v := b.input(r, i)
		switch b.redop {
		case "sum":
			acc += v
		case "prod":
			acc *= v
		case "max":
			acc = max(acc, v)
		case "min":
			acc = min(acc, v)
		}
	}
	return acc
}

// fill writes this rank's inputs and clears what it receives into (inputs
// are never 0, so a result left unwritten shows as wrong).
func (b *bufs[T]) fill() {
	clear(b.recv)
	switch b.op {
	case "allreduce", "broadcast", "reduce", "reducescatter":
		for i := range b.send {
			b.send[i] = b.input(b.rank, i)
		}
	case "allgather", "gather":
		for j := range b.send {
			b.send[j] = b.input(b.rank, b.rank*b.blk+j)
		}
	case "alltoall":
		for i := range b.send {
			b.send[i] = b.input(b.rank, i) // block d goes to rank d
		}
	case "scatter":
		for i := range b.send {
			b.send[i] = b.input(0, i)
		}
	}
}

// verify counts the elements of this rank's result that differ from the
// reference. Ranks that get no result (non-roots of reduce and gather)
// have nothing to check.
func (b *bufs[T]) verify() int {
	wrong := 0
	check := func(got, want T) {
		if got != want {
			wrong++
		}
	}
	switch b.op {
	case "allreduce":
		for i, v := range b.recv {
			check(v, b.reduced(i))
		}
	case "reduce":
		if b.rank == 0 {
			for i, v := range b.recv {
				check(v, b.reduced(i))
			}
		}
	case "broadcast":
		for i, v := range b.recv {
			check(v, b.input(0, i))
		}
	case "allgather", "gather":
		if b.op == "gather" && b.rank != 0 {
			break
		}
		for i, v := range b.recv {
			q := i / b.blk
			check(v, b.input(q, i))
		}
	case "reducescatter":
		for j, v := range b.recv {
			check(v, b.reduced(b.rank*b.blk+j))
		}
	case "alltoall":
		for i, v := range b.recv {
			s, j := i/b.blk, i%b.blk
			check(v, b.input(s, b.rank*b.blk+j))
		}
	case "scatter":
		for j, v := range b.recv {
			check(v, b.input(0, b.rank*b.blk+j))
		}
	}
	return wrong
}
