package compress

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/klauspost/compress/s2"

	"github.com/gorun-hpc/gorun/spmd"
	"github.com/gorun-hpc/gorun/spmd/spmdtest"
)

// TestLosslessIsLossless: top-k, sign and QSGD with each lossless stage
// give every rank the same bits as without it, step after step, and the
// stage reports what it sent.
func TestLosslessIsLossless(t *testing.T) {
	for _, spec := range []string{"topk:0.05", "sign", "qsgd:8"} {
		for _, stage := range []string{"s2", "zstd", "auto"} {
			t.Run(spec+"+"+stage, func(t *testing.T) {
				var mu sync.Mutex
				got := map[string][][]float32{}
				spmdtest.Run(t, 2, func(ctx context.Context, w *spmd.World) error {
					plain, err := Parse(spec, 5)
					if err != nil {
						return err
					}
					staged, err := Parse(spec+"+"+stage, 5)
					if err != nil {
						return err
					}
					if want := spec + "+" + stage; staged.Name() != want {
						return fmt.Errorf("name %q, want %q", staged.Name(), want)
					}
					r := rand.New(rand.NewPCG(uint64(w.Rank()), 1))
					for step := range 3 {
						g := make([]float32, 3000)
						for i := range g {
							g[i] = float32(r.NormFloat64())
						}
						a, b := append([]float32(nil), g...), append([]float32(nil), g...)
						if _, err := plain.AllReduce(ctx, w.Comm, 0, a, nil); err != nil {
							return err
						}
						st, err := staged.AllReduce(ctx, w.Comm, 0, b, nil)
						if err != nil {
							return err
						}
						if st.Sent <= 0 || st.Raw != 4*3000 {
							return fmt.Errorf("step %d: stats %+v", step, st)
						}
						for i := range a {
							if a[i] != b[i] && !(a[i] != a[i] && b[i] != b[i]) {
								return fmt.Errorf("step %d: element %d is %v with the stage, %v without", step, i, b[i], a[i])
							}
						}
						mu.Lock()
						got[fmt.Sprint(w.Rank())] = append(got[fmt.Sprint(w.Rank())], b)
						mu.Unlock()
					}
					return nil
				})
			})
		}
	}
}

// TestLosslessCorrupt: payloads that are not what the encoder wrote, or
// that decode to another length, are errors wrapping ErrCorrupt.
func TestLosslessCorrupt(t *testing.T) {
	src := bytes.Repeat([]byte("gradient "), 100)
	for _, mode := range []Lossless{LosslessS2, LosslessZstd} {
		var g gatherer
		enc, err := g.encode(mode, src)
		if err != nil {
			t.Fatal(err)
		}
		enc = append([]byte(nil), enc...)
		dst := make([]byte, len(src))
		if err := g.decode(mode, dst, enc); err != nil || !bytes.Equal(dst, src) {
			t.Fatalf("%s: round trip: %v", mode, err)
		}
		for name, bad := range map[string][]byte{
			"empty":     nil,
			"garbage":   []byte("not a compressed payload at all"),
			"truncated": enc[:len(enc)/2],
			"short dst": enc, // decoded into one byte less below
		} {
			out := dst
			if name == "short dst" {
				out = dst[:len(dst)-1]
			}
			if err := g.decode(mode, out, bad); !errors.Is(err, ErrCorrupt) {
				t.Errorf("%s, %s: %v, want ErrCorrupt", mode, name, err)
			}
		}
	}
}

// TestLosslessAuto: auto turns S2 on where the link is slow enough for
// the bytes it saves to pay (QSGD at 8 levels shrinks about 3x) and off
// where the link is free, the same on every rank.
func TestLosslessAuto(t *testing.T) {
	for _, tc := range []struct {
		beta float64
		on   bool
	}{{1e-6, true}, {0, false}} {
		t.Run(fmt.Sprintf("beta=%g", tc.beta), func(t *testing.T) {
			spmdtest.Run(t, 2, func(ctx context.Context, w *spmd.World) error {
				c, err := Parse("qsgd:8+auto", 3)
				if err != nil {
					return err
				}
				c.(*qsgd).g.beta = func(context.Context, *spmd.Comm) (float64, error) { return tc.beta, nil }
				r := rand.New(rand.NewPCG(uint64(w.Rank()), 2))
				g := make([]float32, 1<<16)
				for i := range g {
					g[i] = float32(r.NormFloat64())
				}
				st, err := c.AllReduce(ctx, w.Comm, 0, g, nil)
				if err != nil {
					return err
				}
				plain := int64(qsgdBlocksSize(len(g)))
				if on := st.Sent < plain; on != tc.on {
					return fmt.Errorf("sent %d bytes of a %d-byte payload: S2 on %v, want %v", st.Sent, plain, on, tc.on)
				}
				return nil
			})
		})
	}
}

func TestWithLosslessRefused(t *testing.T) {
	for _, spec := range []string{"fp16+s2", "powersgd:2+zstd", "randk:0.1+s2", "topk:0.1+lz4", "none+s2"} {
		if _, err := Parse(spec, 1); err == nil {
			t.Errorf("Parse(%q) succeeded", spec)
		} else if !strings.Contains(err.Error(), "lossless") && !strings.Contains(err.Error(), "all-reduce") {
			t.Errorf("Parse(%q): %v, want it to say why", spec, err)
		}
	}
}

// FuzzLosslessDecode: untrusted S2 and zstd payloads never panic and
// never fill anything but dst.
func FuzzLosslessDecode(f *testing.F) {
	f.Add(s2.Encode(nil, []byte("hello, hello, hello")), uint8(19))
	f.Add([]byte{0x28, 0xb5, 0x2f, 0xfd}, uint8(4))
	f.Fuzz(func(t *testing.T, payload []byte, n uint8) {
		var g gatherer
		for _, mode := range []Lossless{LosslessS2, LosslessZstd} {
			dst := make([]byte, int(n), int(n)+8)
			guard := dst[:cap(dst)]
			for i := int(n); i < len(guard); i++ {
				guard[i] = 0xAA
			}
			_ = g.decode(mode, dst, payload)
			for i := int(n); i < len(guard); i++ {
				if guard[i] != 0xAA {
					t.Fatalf("%s wrote past dst", mode)
				}
			}
		}
	})
}

var _ = spmd.Undefined
