package tp_test

import (
	"encoding/binary"
	"fmt"
	"slices"
	"testing"

	"github.com/gorun-hpc/gorun/strategies/nn"
	"github.com/gorun-hpc/gorun/strategies/tp"
)

// masks are a block's dropout masks after a training pass.
type masks struct {
	probs, resid1, resid2 []float32
}

func blockMasks(k *tp.Block) masks {
	d, ok := k.Attn.Core.Drop.(*tp.Dropout)
	if !ok {
		panic(fmt.Sprintf("the attention's dropout is a %T", k.Attn.Core.Drop))
	}
	return masks{slices.Clone(d.Mask()), slices.Clone(k.Drop1.Mask()), slices.Clone(k.Drop2.Mask())}
}

// dropoutBlockCase is a block with dropout over size ranks against the
// same block on one rank: the rule for the masks makes them equal. The
// blocks it builds are left in ref and split, by rank.
func dropoutBlockCase(t *testing.T, size int, sp bool, ref **tp.Block, split []*tp.Block) layerCase {
	n, tt := tokens(size)
	cfg := blockConfig(size, 0.3)
	build := func(b *nn.Builder, g *tp.Group) (*tp.Block, error) {
		return tp.NewBlock(b.Scope("h.0"), g, cfg, tp.NewRNG(seed), "h.0")
	}
	return layerCase{
		name: fmt.Sprintf("tp %d/sp=%v", size, sp),
		size: size, sp: sp, n: n, t: tt, in: cfg.Dim, out: cfg.Dim, rowsIn: true, rowsOut: true,
		ref: func(b *nn.Builder) nn.Layer {
			g := tp.NewGroup(oneRank(t), false)
			if err := g.SetTokens(n, tt); err != nil {
				t.Fatal(err)
			}
			k, err := build(b, g)
			if err != nil {
				t.Fatal(err)
			}
			*ref = k
			return k
		},
		split: func(b *nn.Builder, g *tp.Group) (splitLayer, error) {
			k, err := build(b, g)
			split[g.Rank] = k
			return k, err
		},
	}
}

// TestDropoutMasks checks Megatron's rule for random numbers: a
// replicated region drops the same elements on every rank, a split
// region different ones, and the ranks' masks together are the mask of
// the block on one rank, so that the block computes the same.
func TestDropoutMasks(t *testing.T) {
	for _, tc := range []struct {
		size int
		sp   bool
	}{{2, false}, {2, true}, {3, false}, {3, true}, {4, true}} {
		var ref *tp.Block
		split := make([]*tp.Block, tc.size)
		c := dropoutBlockCase(t, tc.size, tc.sp, &ref, split)
		t.Run(c.name, func(t *testing.T) {
			c.check(t) // output and gradients equal the one rank's
			if t.Failed() {
				return
			}
			want := blockMasks(ref)
			for _, m := range [][]float32{want.probs, want.resid1, want.resid2} {
				if !slices.Contains(m, 0) || slices.Max(m) == 0 {
					t.Fatalf("a mask drops all or nothing: %v", m)
				}
			}
			got := make([]masks, tc.size)
			for r, k := range split {
				got[r] = blockMasks(k)
			}
			// The probabilities, [n, heads, t, t], are split by heads.
			per := ref.Attn.Heads / tc.size
			tt := c.t
			for r, m := range got {
				first := split[r].Attn.First
				for b := 0; b < c.n; b++ {
					w := want.probs[(b*ref.Attn.Heads+first)*tt*tt : (b*ref.Attn.Heads+first+per)*tt*tt]
					if g := m.probs[b*per*tt*tt : (b+1)*per*tt*tt]; !slices.Equal(g, w) {
						t.Errorf("rank %d: sequence %d: the mask of heads [%d, %d) is not the one rank's", r, b, first, first+per)
					}
				}
			}
			if slices.Equal(got[0].probs, got[1].probs) {
				t.Errorf("ranks 0 and 1 drop the same attention probabilities: a split region's masks must differ")
			}
			// The residual stream: replicated without sequence
			// parallelism, split by token rows with it.
			for r, m := range got {
				for i, pair := range [][2][]float32{{m.resid1, want.resid1}, {m.resid2, want.resid2}} {
					w := pair[1]
					if tc.sp {
						first, rows := split[r].G.RowBlock()
						w = w[first*c.in : (first+rows)*c.in]
					}
					if !slices.Equal(pair[0], w) {
						t.Errorf("rank %d: residual dropout %d: the mask is not the one rank's (rows of it)", r, i+1)
					}
				}
			}
			same := slices.Equal(got[0].resid1, got[1].resid1) && slices.Equal(got[0].resid2, got[1].resid2)
			if same == tc.sp {
				t.Errorf("ranks 0 and 1 drop the same residual elements: %v; want %v", same, !tc.sp)
			}
		})
	}
}

// TestBlockDropoutTokens checks that a block with dropout and without
// sequence parallelism needs no SetTokens: the attention's mask takes
// the sequences' length from the input, whatever the group was told.
func TestBlockDropoutTokens(t *testing.T) {
	const size = 2
	cfg := blockConfig(size, 0.3)
	x := randn("x", 2*4*cfg.Dim)
	for _, tc := range []struct {
		name string
		set  func(g *tp.Group) error
	}{
		{"told", func(g *tp.Group) error { return g.SetTokens(2, 4) }},
		{"never told", func(g *tp.Group) error { return nil }},
		{"told another shape", func(g *tp.Group) error { return g.SetTokens(4, 2) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := runGroup(t, size, false, func(g *tp.Group) (masks, error) {
				if err := tc.set(g); err != nil {
					return masks{}, err
				}
				b := nn.NewBuilder()
				k, err := tp.NewBlock(b.Scope("h.0"), g, cfg, tp.NewRNG(seed), "h.0")
				if err != nil {
					return masks{}, err
				}
				b.Build(seed)
				k.Forward(nn.FromData(slices.Clone(x), 2, 4, cfg.Dim), true)
				return blockMasks(k), nil
			})
			want := runGroup(t, 1, false, func(g *tp.Group) (masks, error) {
				g.SetTokens(2, 4)
				b := nn.NewBuilder()
				k, err := tp.NewBlock(b.Scope("h.0"), g, cfg, tp.NewRNG(seed), "h.0")
				if err != nil {
					return masks{}, err
				}
				b.Build(seed)
				k.Forward(nn.FromData(slices.Clone(x), 2, 4, cfg.Dim), true)
				return blockMasks(k), nil
			})[0]
			if t.Failed() {
				return
			}
			var union []float32
			for b := 0; b < 2; b++ {
				for _, m := range got {
					union = append(union, m.probs[b*len(m.probs)/2:(b+1)*len(m.probs)/2]...)
				}
			}
			if !slices.Equal(union, want.probs) {
				t.Errorf("the ranks' attention masks together are not the one rank's")
			}
		})
	}
}

// TestRNGState checks that the streams' state round-trips: after a
// restore the next masks are those that followed the save.
func TestRNGState(t *testing.T) {
	x := nn.FromData(randn("x", 6*5), 6, 5)
	mask := func(r *tp.RNG, name string) []float32 {
		d := &tp.Dropout{P: 0.5, Stream: r.Stream(name)}
		d.Forward(x, true)
		return slices.Clone(d.Mask())
	}
	rng := tp.NewRNG(seed)
	mask(rng, "a")
	mask(rng, "b")
	mask(rng, "b")
	state, err := rng.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	wantA, wantB := mask(rng, "a"), mask(rng, "b")
	if slices.Equal(wantA, wantB) {
		t.Fatal("two streams drew the same mask")
	}

	for _, tc := range []struct {
		name string
		into *tp.RNG
	}{
		{"into a fresh tracker of another seed", tp.NewRNG(seed + 1)},
		{"into the tracker that saved it", rng},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.into.UnmarshalBinary(state); err != nil {
				t.Fatal(err)
			}
			if got := mask(tc.into, "a"); !slices.Equal(got, wantA) {
				t.Errorf("stream a: the mask after the restore is not the one after the save")
			}
			if got := mask(tc.into, "b"); !slices.Equal(got, wantB) {
				t.Errorf("stream b: the mask after the restore is not the one after the save")
			}
		})
	}
	t.Run("without the restore", func(t *testing.T) {
		if got := mask(tp.NewRNG(seed+1), "a"); slices.Equal(got, wantA) {
			t.Errorf("a tracker of another seed drew the same mask")
		}
	})
}

// TestRNGCorrupt checks that a damaged state is an error, not a panic.
func TestRNGCorrupt(t *testing.T) {
	rng := tp.NewRNG(seed)
	rng.Stream("dropout/h.0.attn").Uint64()
	rng.Stream("dropout/h.0.resid1").Uint64()
	good, err := rng.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	field := func(b []byte) []byte { return append(binary.AppendUvarint(nil, uint64(len(b))), b...) }
	for _, tc := range []struct {
		name  string
		state []byte
	}{
		{"truncated", good[:len(good)-1]},
		{"cut in a name", good[:3]},
		{"name without state", field([]byte("a"))},
		{"huge length", binary.AppendUvarint(nil, 1<<62)},
		{"overlong varint", []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}},
		{"short stream state", append(field([]byte("a")), field([]byte{1, 2, 3})...)},
		{"stream state of another kind", append(field([]byte("a")), field(make([]byte, 20))...)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				if v := recover(); v != nil {
					t.Fatalf("UnmarshalBinary panicked: %v", v)
				}
			}()
			if err := tp.NewRNG(seed).UnmarshalBinary(tc.state); err == nil {
				t.Errorf("UnmarshalBinary(%x) = nil, want an error", tc.state)
			}
		})
	}
	t.Run("empty", func(t *testing.T) {
		if err := tp.NewRNG(seed).UnmarshalBinary(nil); err != nil {
			t.Errorf("UnmarshalBinary(nil) = %v: no streams is a state", err)
		}
	})
}
