package prims

import (
	"math"
	"unsafe"

	"github.com/gorun-hpc/gorun/spmd"
	"github.com/gorun-hpc/gorun/topo"
)

// The rings of pieces behind the slots (castRing): the broadcasts' cells
// and streams, through which a root runs ahead of the others, and the
// folds of the small reduces and gathers (collectPiece); and the Shared
// broadcast, which runs through the first two (the Shared scatter too).

// castRing is where a ring of broadcast buffers sits in the area. Its
// methods take it by pointer: taken by value, the 64-byte struct was
// spilled in 8-byte stores and read back in 16-byte loads, which cannot
// forward from them and waited for every older store to be written,
// among them the root's stores to lines the others poll. 8-byte
// broadcasts on 2 ranks took 0.071 us against 0.082 (collbench, medians
// of 7 alternating runs; Open MPI 0.052).
type castRing struct {
	off, stride int    // the first buffer, and the distance between buffers
	n           uint32 // buffers, a power of two
	done        int    // the cache lines that count the pieces each rank is done with
	ahead       uint32 // how many pieces ahead a root takes a buffer's lines (prefetch), or 0
	// seen is, per rank, the count of its done line that this rank last
	// read: a root reads the line again only when that is too old for
	// the buffer it is to write, once in up to n pieces.
	seen []uint32
}

// bufOff is the offset of the buffer of piece s of ring g in the area.
func (g *castRing) bufOff(s uint32) int { return g.off + int(s&(g.n-1))*g.stride }

// head returns the header of the buffer of piece s of ring g in a; its
// part signal says which piece's data the buffer holds.
func (g *castRing) head(a *area, s uint32) *slotHead {
	return (*slotHead)(unsafe.Pointer(&a.mem[g.bufOff(s)]))
}

// castData returns n elements of the data of the buffer of piece s of
// ring g in a.
func castData[T spmd.Number](a *area, g *castRing, s uint32, n int) []T {
	return at[T](a, g.bufOff(s), n)
}

// castAhead is how many broadcasts ahead a root takes the lines of a
// cell (castRing.prefetch): far enough that no rank still waits on it,
// near enough that the lines are still in the root's cache when it writes
// them. 4 was faster than 8 and 16 at 8-32 B (collbench on 2 ranks and 2
// cores, medians of 9 alternating runs: 0.11-0.15 us against 0.15-0.18).
const castAhead = 4

// castLines is the largest broadcast whose lines a root takes ahead. From
// 512 B up, taking the header alone or with up to 8 lines of data slowed
// the broadcast (512 B: 0.39-0.48 us against 0.31-0.37), and a root's
// copy of a larger cell streams anyway.
const castLines = 256

// cacheLine is the size of a cache line on the machines gorun is
// measured on (x86-64; most arm64 cores).
const cacheLine = 64

// prefetch takes for writing the lines that a broadcast of b bytes will
// write in the buffer of piece s of g: its header, and its data unless
// that fits in the header. The others read those lines when the buffer
// last held a piece, n pieces before, and keep copies; the root's first
// store to a line has to take them back from their caches, a round trip
// between the cores, and a root that broadcast again and again stalled on
// those stores. On 2 ranks and 2 cores, blocks of 40,000 broadcasts with
// and without in one job, medians of 15 blocks each: 8 B 0.12 us against
// 0.24 (0.25-0.29 against 0.29 while the machine ran slow), 64 B 0.26
// against 0.31, 256 B 0.32-0.34 against 0.41-0.43; Open MPI took
// 0.12-0.16 at 8 B and 0.25-0.29 at 64-256 B.
func (g *castRing) prefetch(a *area, s uint32, b int) {
	off := g.bufOff(s)
	prefetchWrite(unsafe.Pointer(&a.mem[off]))
	if b <= inlineMax {
		return
	}
	for o := 0; o < b; o += cacheLine {
		prefetchWrite(unsafe.Pointer(&a.mem[off+headSize+o]))
	}
}

// doneBy returns the signal of rank r that counts the pieces of ring g it
// is done with.
func (g *castRing) doneBy(a *area, r int) *signal {
	return &(*slotHead)(unsafe.Pointer(&a.mem[g.done+r*headSize])).part
}

// sharedBcast copies root's buf into every rank's through the cells, when
// it fits one, or else sharedChunk bytes at a time through the
// streams (castPiece).
func sharedBcast[T spmd.Number](k *call, buf []T, root int) error {
	a, err := areaOf(k)
	if a == nil {
		return k.fallBack(err, topo.Tree, func() error { return treeBcast(k, buf, root, phaseMain) })
	}
	if len(buf)*sizeOf[T]() <= sharedCell {
		a.casts++
		return castPiece(k, a, &a.cells, a.casts, len(buf), buf, buf, 0, root)
	}
	per := sharedChunk / sizeOf[T]()
	for lo := 0; lo < len(buf); lo += per {
		a.chunks++
		piece := buf[lo:min(lo+per, len(buf))]
		if err := castPiece(k, a, &a.streams, a.chunks, len(piece), piece, piece, 0, root); err != nil {
			return err
		}
	}
	return nil
}

// castPiece broadcasts piece s of ring g, n elements, the root's src: the
// root waits until every rank is done with the piece that last used the
// buffer (at once unless one lags g.n pieces behind), writes it and goes
// on; the others copy dst's elements of it out, from element lo on (a
// broadcast copies all of it, a scatter a rank's block); a rank that
// copies nothing does not wait for the piece. Every rank then counts the
// piece done.
//
// The root reads a rank's count only when the one it read last (g.seen)
// is too old, once in up to g.n pieces: a count read at every piece
// crossed between the cores twice per broadcast (the root's read, then the
// reader's next store), besides the header and the data. With that, and a
// small piece inline in its header (slotHead), a broadcast of 8 B on 2
// ranks and 2 cores took 0.30 us against 0.46 (collbench, medians of 5
// alternating runs; Open MPI 0.13); 64 B, not inline, 0.46 against 0.47.
// A root that knows the others done with the buffer castAhead pieces on
// takes its lines now, for broadcasts of up to castLines bytes
// (castRing.prefetch).
func castPiece[T spmd.Number](k *call, a *area, g *castRing, s uint32, n int, src, dst []T, lo, root int) error {
	me := k.cc.Rank()
	if me == root {
		// Before the first g.n pieces the count wraps below zero, which
		// every rank has reached.
		// The same pass says whether every rank was done, by those
		// counts, with the buffer g.ahead pieces on (the one before it
		// there, next - g.n): a root that runs the whole ring ahead of a
		// rank is about to write the buffers that rank reads next, and
		// taking their lines ahead would take them from under its reads.
		free, b, next := s-g.n, n*sizeOf[T](), s+g.ahead
		ahead := g.ahead > 0 && b <= castLines
		for r := range a.p {
			if r == me {
				continue
			}
			if int32(g.seen[r]-free) < 0 {
				done := g.doneBy(a, r)
				if err := done.wait(k, r, free); err != nil {
					return err
				}
				g.seen[r] = done.round.Load()
			}
			ahead = ahead && int32(g.seen[r]-(next-g.n)) >= 0
		}
		toSlot(&a.in, castData[T](a, g, s, n), src)
		h := g.head(a, s)
		k.stamp(h)
		h.part.store(s)
		if ahead {
			g.prefetch(a, next, b)
		}
	} else if len(dst) > 0 {
		h := g.head(a, s)
		if err := h.part.wait(k, root, s); err != nil {
			return err
		}
		if err := k.matches(root, h); err != nil {
			return err
		}
		copy(dst, castData[T](a, g, s, n)[lo:])
	}
	g.doneBy(a, me).store(s)
	return nil
}

// sharedBcastCost is sharedBcast's. The root runs up to sharedCells
// broadcasts, or sharedStreams chunks of a larger one, ahead, so a crowded
// host's wake-ups are paid once for many of them, as through a message
// algorithm's queues: the wait per piece is a pair's. p copies of every
// byte share the host's cores.
func sharedBcastCost(m topo.Model, s topo.Shape, n float64) estimate {
	return sharedCost(m, s, n, func(float64) float64 {
		pieces := max(1, math.Ceil(n/sharedChunk))
		return pieces*sharedLatency*m.Handoff(s, 2) + n*m.Local.Beta*m.Share(s.P)
	})
}
