package prims_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/gorun-hpc/gorun/prims"
	"github.com/gorun-hpc/gorun/spmd"
	"github.com/gorun-hpc/gorun/spmd/contract"
	"github.com/gorun-hpc/gorun/spmd/spmdtest"
	"github.com/gorun-hpc/gorun/topo"
)

// TestSharedRounds runs the shared algorithms back to back, with broadcasts
// from every root among them, on ranks that dawdle at random: a rank that
// has finished a broadcast's round goes on while another still copies out
// of the root's slot, so whoever writes that slot next must wait for it
// (the loose rounds), and a reduce's ranks other than the root read nothing
// in the round. Buffers span several rounds; every result is checked.
func TestSharedRounds(t *testing.T) {
	const p = 4
	all := prims.WithAlgo(topo.Shared)
	spmdtest.Run(t, p, func(ctx context.Context, w *spmd.World) error {
		rng := rand.New(rand.NewPCG(uint64(w.Rank()), 1))
		dawdle := func() {
			if rng.IntN(3) == 0 {
				time.Sleep(time.Duration(rng.IntN(200)) * time.Microsecond)
			}
		}
		big := prims.SharedChunk/8 + 1000 // float64s: two rounds
		for it := range 30 {
			root := it % p
			b := make([]float64, big)
			if w.Rank() == root {
				b = fill(big, func(i int) float64 { return float64(it*big + i) })
			}
			dawdle()
			if err := prims.Broadcast(ctx, w.Comm, b, root, all); err != nil {
				return err
			}
			if err := expect(fmt.Sprintf("broadcast %d from %d", it, root), b, big, func(i int) float64 { return float64(it*big + i) }); err != nil {
				return err
			}
			dawdle()
			s := fill(3000, func(i int) int32 { return int32(w.Rank()*i + it) })
			if err := prims.AllReduce(ctx, w.Comm, s, prims.Sum[int32](), all); err != nil {
				return err
			}
			if err := expect(fmt.Sprintf("all-reduce %d", it), s, 3000, func(i int) int32 { return int32(p*(p-1)/2*i + p*it) }); err != nil {
				return err
			}
			dawdle()
			// A reduce of a full round (each rank reduces a block) and a
			// short one (the root folds them all), in place every other
			// time; the others' send is left alone.
			mine64 := func(i int) float64 { return float64(w.Rank()*i + it) }
			rs := fill(big, mine64)
			var rr []float64
			if w.Rank() == root {
				rr = make([]float64, big)
				if it%2 == 1 {
					rr = rs
				}
			}
			if err := reduceChecked(ctx, w, rs, rr, mine64, root, it, all); err != nil {
				return err
			}
			dawdle()
			// A gather and a scatter of blocks of two rounds (the
			// scatter's buffer five pieces of the streams, blocks across
			// their edges), and a scatter that fits a cell, from the
			// same root, in place every other time.
			blockOf := func(r int) func(i int) float64 { return func(i int) float64 { return float64(r*big + i + it) } }
			gs := fill(big, blockOf(w.Rank()))
			var gr, ss []float64
			if w.Rank() == root {
				gr, ss = make([]float64, p*big), fill(p*big, func(i int) float64 { return float64(i + it) })
				if it%2 == 1 {
					copy(gr[root*big:], gs)
					gs = gr[root*big : (root+1)*big]
				}
			}
			if err := prims.Gather(ctx, w.Comm, gs, gr, root, all); err != nil {
				return err
			}
			if w.Rank() == root {
				if err := expect(fmt.Sprintf("gather %d to %d", it, root), gr, p*big, func(i int) float64 { return float64(i + it) }); err != nil {
					return err
				}
			}
			sr := make([]float64, big)
			if w.Rank() == root && it%2 == 1 {
				sr = ss[root*big : (root+1)*big]
			}
			if err := prims.Scatter(ctx, w.Comm, ss, sr, root, all); err != nil {
				return err
			}
			if err := expect(fmt.Sprintf("scatter %d from %d", it, root), sr, big, blockOf(w.Rank())); err != nil {
				return err
			}
			small := prims.SharedCell / 8 / p
			var ssmall []float64
			if w.Rank() == root {
				ssmall = fill(p*small, func(i int) float64 { return float64(i - it) })
			}
			rsmall := make([]float64, small)
			if err := prims.Scatter(ctx, w.Comm, ssmall, rsmall, root, all); err != nil {
				return err
			}
			if err := expect(fmt.Sprintf("small scatter %d from %d", it, root), rsmall, small, func(i int) float64 { return float64(w.Rank()*small + i - it) }); err != nil {
				return err
			}
			dawdle()
			g := make([]uint8, p*big)
			mine := fill(big, func(i int) uint8 { return uint8(w.Rank() + i + it) })
			if err := prims.AllGather(ctx, w.Comm, mine, g, all); err != nil {
				return err
			}
			if err := expect(fmt.Sprintf("all-gather %d", it), g, p*big, func(i int) uint8 { return uint8(i/big + i%big + it) }); err != nil {
				var bad []int
				for i := range g {
					if g[i] != uint8(i/big+i%big+it) {
						bad = append(bad, i)
					}
				}
				return fmt.Errorf("%w; %d wrong: %v", err, len(bad), bad[:min(len(bad), 10)])
			}
		}
		return nil
	})
}

// TestSharedCastRings runs shared broadcasts through each of their rings
// (the cells for small broadcasts, the streams for the chunks of larger
// ones) in long runs from one root, while the rank after the root dawdles
// now and then: the root runs ahead until it would write a buffer that
// rank has not read, as many pieces back as the ring holds, and must wait
// there. Slot rounds (an all-reduce) come between the runs; every result
// is checked.
func TestSharedCastRings(t *testing.T) {
	rings := []struct {
		name     string
		lo, hi   int // elements of float64 per broadcast
		pieces   int // the ring's buffers
		perPiece int // elements of float64 per piece
	}{
		{"cells", 1, prims.SharedCell / 8, prims.SharedCells, prims.SharedCell / 8},
		{"streams", prims.SharedCell/8 + 1, 2*prims.SharedChunk/8 + 1000, prims.SharedStreams, prims.SharedChunk / 8},
	}
	for _, ring := range rings {
		for _, p := range []int{2, 3, 4} {
			t.Run(fmt.Sprintf("%s/%d", ring.name, p), func(t *testing.T) {
				all := prims.WithAlgo(topo.Shared)
				spmdtest.Run(t, p, func(ctx context.Context, w *spmd.World) error {
					run, runs := 3*ring.pieces, 4
					pieces := 0 // run through the ring so far
					for it := range run * runs {
						root := it / run % p
						if it%run == 0 {
							s := fill(100, func(i int) int64 { return int64(w.Rank() + i) })
							if err := prims.AllReduce(ctx, w.Comm, s, prims.Sum[int64](), all); err != nil {
								return err
							}
						}
						n := ring.lo + it*7919%(ring.hi-ring.lo+1)
						if w.Rank() == (root+1)%p && pieces%ring.pieces < (n+ring.perPiece-1)/ring.perPiece {
							time.Sleep(2 * time.Millisecond)
						}
						pieces += (n + ring.perPiece - 1) / ring.perPiece
						want := func(i int) float64 { return float64(it*ring.hi + i) }
						b := make([]float64, n)
						if w.Rank() == root {
							b = fill(n, want)
						}
						if err := prims.Broadcast(ctx, w.Comm, b, root, all); err != nil {
							return err
						}
						if err := expect(fmt.Sprintf("broadcast %d of %d elements from %d", it, n, root), b, n, want); err != nil {
							return err
						}
					}
					return nil
				})
			})
		}
	}
}

// TestSharedScatterFrom: with a core for each rank the Shared all-reduce
// scatters from a size that shrinks with the ranks; every size across the
// crossover, blocks of a few elements and uneven ones among them, sums
// right at np 3, 8 and 16, the ranks dawdling at random.
func TestSharedScatterFrom(t *testing.T) {
	for _, c := range []struct{ p, cores, want int }{{2, 2, 8 << 10}, {4, 16, 4 << 10}, {8, 16, 1 << 10}, {16, 16, 1 << 10}, {4, 2, 8 << 10}} {
		if got := prims.SharedScatterFrom(c.p, c.cores); got != c.want {
			t.Errorf("%d ranks on %d cores scatter from %d bytes, want %d", c.p, c.cores, got, c.want)
		}
	}
	t.Setenv(contract.EnvHostCPUs, "64") // a core for each rank
	all := prims.WithAlgo(topo.Shared)
	for _, p := range []int{3, 8, 16} {
		t.Run(fmt.Sprint(p), func(t *testing.T) {
			from := prims.SharedScatterFrom(p, 64) / 4
			spmdtest.Run(t, p, func(ctx context.Context, w *spmd.World) error {
				rng := rand.New(rand.NewPCG(uint64(w.Rank()), 3))
				for it, n := range []int{from - 1, from, from + 1, from + p - 1, 2*from + 3, 5, from / 2} {
					if rng.IntN(3) == 0 {
						time.Sleep(time.Duration(rng.IntN(200)) * time.Microsecond)
					}
					s := fill(n, func(i int) int32 { return int32(w.Rank()*i + it) })
					if err := prims.AllReduce(ctx, w.Comm, s, prims.Sum[int32](), all); err != nil {
						return err
					}
					if err := expect(fmt.Sprintf("all-reduce of %d", n), s, n, func(i int) int32 { return int32(p*(p-1)/2*i + p*it) }); err != nil {
						return err
					}
				}
				return nil
			})
		})
	}
}

// TestSharedFolds runs small shared reduces, and gathers, through the folds' ring in
// runs of 40 from one root, the next run from the next rank, in place
// every third time, while ranks dawdle at random and each root early in
// its run long enough for the others to run on through the whole ring: a
// rank runs ahead of the roots until it would write a cell whose piece's
// root, the last run's at first, has not folded it, as many pieces back
// as the ring holds, and must wait there. Slot rounds (an all-reduce, and a
// reduce that ends in a short slot round) come between; every result is
// checked, and the others' parts are left alone.
func TestSharedFolds(t *testing.T) {
	for _, p := range []int{2, 3, 4} {
		t.Run(fmt.Sprint(p), func(t *testing.T) {
			all := prims.WithAlgo(topo.Shared)
			spmdtest.Run(t, p, func(ctx context.Context, w *spmd.World) error {
				rng := rand.New(rand.NewPCG(uint64(w.Rank()), 2))
				for it := range 5 * prims.SharedFolds {
					root := it / 40 % p
					if it%40 == 0 {
						s := fill(prims.SharedScatterMin/8+100, func(i int) int64 { return int64(w.Rank() + i) })
						if err := prims.Reduce(ctx, w.Comm, s, s, prims.Sum[int64](), root, all); err != nil {
							return err
						}
						if err := prims.AllReduce(ctx, w.Comm, s[:100], prims.Sum[int64](), all); err != nil {
							return err
						}
					}
					switch {
					case it%40 == 3 && w.Rank() == root:
						// The others run on, up to 37 pieces, more than
						// the ring holds.
						time.Sleep(3 * time.Millisecond)
					case rng.IntN(4) == 0:
						time.Sleep(time.Duration(rng.IntN(300)) * time.Microsecond)
					}
					n := 1 + it*7919%(prims.SharedScatterMin/8-1)
					mine := func(i int) float64 { return float64(w.Rank()*i + it) }
					send := fill(n, mine)
					var recv []float64
					if w.Rank() == root {
						recv = make([]float64, n)
						if it%3 == 0 {
							recv = send
						}
					}
					if it%5 == 4 {
						// A gather takes the same ring.
						var all64 []float64
						if w.Rank() == root {
							all64 = make([]float64, p*n)
						}
						if err := prims.Gather(ctx, w.Comm, send, all64, root, all); err != nil {
							return err
						}
						if w.Rank() == root {
							if err := expect(fmt.Sprintf("gather %d to %d", it, root), all64, p*n, func(i int) float64 { return float64(i/n*(i%n) + it) }); err != nil {
								return err
							}
						}
						continue
					}
					if err := reduceChecked(ctx, w, send, recv, mine, root, it, all); err != nil {
						return err
					}
				}
				return nil
			})
		})
	}
}

// reduceChecked sums send, rank r's element i being mine(i) = r*i + it,
// into recv at root, and checks the root's result and that the others'
// send is left alone.
func reduceChecked(ctx context.Context, w *spmd.World, send, recv []float64, mine func(int) float64, root, it int, opt prims.Option) error {
	p, n := w.Size(), len(send)
	if err := prims.Reduce(ctx, w.Comm, send, recv, prims.Sum[float64](), root, opt); err != nil {
		return err
	}
	if w.Rank() != root {
		return expect(fmt.Sprintf("reduce %d to %d: send", it, root), send, n, mine)
	}
	return expect(fmt.Sprintf("reduce %d to %d", it, root), recv, n, func(i int) float64 { return float64(p*(p-1)/2*i + p*it) })
}

// TestSharedLengthsChecked: ranks that pass buffers of different lengths
// to a Shared algorithm get an error that says so (ErrCount), where they
// got wrong results, or a part another rank had written for an earlier
// call, and returned nil. Rank 1 passes one element more than the others,
// at sizes that take the same path on every rank: a part inline in its
// header, a cell or a piece of the folds, a scatter round, two rounds. Every
// rank that reads rank 1's part (or rank 1, reading root 0's) must fail,
// and one at least with ErrCount; none may hang.
func TestSharedLengthsChecked(t *testing.T) {
	const p = 3
	all := prims.WithAlgo(topo.Shared)
	type run func(ctx context.Context, c *spmd.Comm, n int) error
	calls := []struct {
		name    string
		call    run
		readers []int // the ranks that read rank 1's part, or rank 1 reading the root's
	}{
		{"broadcast", func(ctx context.Context, c *spmd.Comm, n int) error {
			return prims.Broadcast(ctx, c, make([]float64, n), 0, all)
		}, []int{1}},
		{"allreduce", func(ctx context.Context, c *spmd.Comm, n int) error {
			return prims.AllReduce(ctx, c, make([]float64, n), prims.Sum[float64](), all)
		}, []int{0, 1, 2}},
		{"reduce", func(ctx context.Context, c *spmd.Comm, n int) error {
			return prims.Reduce(ctx, c, make([]float64, n), make([]float64, n), prims.Sum[float64](), 0, all)
		}, []int{0}},
		{"allgather", func(ctx context.Context, c *spmd.Comm, n int) error {
			return prims.AllGather(ctx, c, make([]float64, n), make([]float64, p*n), all)
		}, []int{0, 1, 2}},
		{"gather", func(ctx context.Context, c *spmd.Comm, n int) error {
			return prims.Gather(ctx, c, make([]float64, n), make([]float64, p*n), 0, all)
		}, []int{0}},
		{"scatter", func(ctx context.Context, c *spmd.Comm, n int) error {
			return prims.Scatter(ctx, c, make([]float64, p*n), make([]float64, n), 0, all)
		}, []int{1}},
		{"reducescatter", func(ctx context.Context, c *spmd.Comm, n int) error {
			return prims.ReduceScatter(ctx, c, make([]float64, p*n), make([]float64, n), prims.Sum[float64](), all)
		}, []int{0, 1, 2}},
		{"alltoall", func(ctx context.Context, c *spmd.Comm, n int) error {
			return prims.AllToAll(ctx, c, make([]float64, p*n), make([]float64, p*n), all)
		}, []int{0, 1, 2}},
	}
	for _, cl := range calls {
		for _, n := range []int{3, 100, 1500, prims.SharedChunk/8 + 1000} {
			t.Run(fmt.Sprintf("%s/n=%d", cl.name, n), func(t *testing.T) {
				errs := make([]error, p)
				spmdtest.Run(t, p, func(ctx context.Context, w *spmd.World) error {
					ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
					defer cancel()
					mine := n
					if w.Rank() == 1 {
						mine++
					}
					errs[w.Rank()] = cl.call(ctx, w.Comm, mine)
					return nil
				})
				caught(t, errs, cl.readers, prims.ErrCount)
			})
		}
	}
}

// TestSharedCollectivesChecked: a rank in another collective call than the
// others, of the same size, fails with ErrMismatch where the Shared
// algorithms read its part, instead of taking it for theirs: rank 1 makes
// the second call of each pair, the others the first.
func TestSharedCollectivesChecked(t *testing.T) {
	const p, n = 3, 12 // float64s: 96 bytes, a block of 4 each
	all := prims.WithAlgo(topo.Shared)
	pairs := []struct {
		name          string
		first, second func(ctx context.Context, c *spmd.Comm) error
		readers       []int
	}{
		{"allreduce/allgather", func(ctx context.Context, c *spmd.Comm) error {
			return prims.AllReduce(ctx, c, make([]float64, n), prims.Sum[float64](), all)
		}, func(ctx context.Context, c *spmd.Comm) error {
			return prims.AllGather(ctx, c, make([]float64, n/p), make([]float64, n), all)
		}, []int{0, 1, 2}},
		{"reduce/gather", func(ctx context.Context, c *spmd.Comm) error {
			return prims.Reduce(ctx, c, make([]float64, n), make([]float64, n), prims.Sum[float64](), 0, all)
		}, func(ctx context.Context, c *spmd.Comm) error {
			return prims.Gather(ctx, c, make([]float64, n/p), make([]float64, n), 0, all)
		}, []int{0}},
		{"barrier/allreduce", func(ctx context.Context, c *spmd.Comm) error {
			return prims.Barrier(ctx, c, all)
		}, func(ctx context.Context, c *spmd.Comm) error {
			return prims.AllReduce(ctx, c, make([]float64, n), prims.Sum[float64](), all)
		}, []int{0, 1, 2}},
		{"broadcast/scatter", func(ctx context.Context, c *spmd.Comm) error {
			return prims.Broadcast(ctx, c, make([]float64, n), 0, all)
		}, func(ctx context.Context, c *spmd.Comm) error {
			return prims.Scatter(ctx, c, make([]float64, n), make([]float64, n/p), 0, all)
		}, []int{1}},
	}
	for _, pr := range pairs {
		t.Run(pr.name, func(t *testing.T) {
			errs := make([]error, p)
			spmdtest.Run(t, p, func(ctx context.Context, w *spmd.World) error {
				ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
				defer cancel()
				if w.Rank() == 1 {
					errs[1] = pr.second(ctx, w.Comm)
				} else {
					errs[w.Rank()] = pr.first(ctx, w.Comm)
				}
				return nil
			})
			caught(t, errs, pr.readers, prims.ErrMismatch)
		})
	}
}

// caught checks what the ranks of a job of mismatched calls returned:
// every rank in readers failed, none ran out of time, and one at least
// with want.
func caught(t *testing.T, errs []error, readers []int, want error) {
	t.Helper()
	found := false
	for r, err := range errs {
		if errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("rank %d hung: %v", r, err)
		}
		found = found || errors.Is(err, want)
	}
	for _, r := range readers {
		if errs[r] == nil {
			t.Errorf("rank %d, which reads rank 1's part (rank 1: the root's), returned nil", r)
		}
	}
	if !found {
		t.Errorf("no rank failed with %v: %v", want, errs)
	}
}
