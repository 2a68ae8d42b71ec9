package compress

import (
	"bytes"
	"context"
	"encoding"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/gorun-hpc/gorun/spmd"
	"github.com/gorun-hpc/gorun/spmd/spmdtest"
)

// statefulSpecs are the codecs that keep state between calls.
var statefulSpecs = []string{"topk:0.1", "topk:0.1+s2", "randk:0.25", "sign", "sign+zstd", "qsgd:8", "powersgd:2"}

// stateBuckets are the buckets of the state tests: key 0 holds a 16 x 12
// matrix (which powersgd:2 compresses) and a vector, key 3 a vector.
var stateBuckets = []struct {
	key, n int
	segs   []Segment
}{
	{0, 200, []Segment{{Off: 0, Rows: 16, Cols: 12}, {Off: 192, Rows: 1, Cols: 8}}},
	{3, 37, []Segment{{Off: 0, Rows: 1, Cols: 37}}},
}

// stateSteps runs codec on rank r through steps [from, to) of every
// bucket and returns each call's output.
func stateSteps(ctx context.Context, c *spmd.Comm, codec Codec, from, to int) ([][]float32, error) {
	var out [][]float32
	for s := from; s < to; s++ {
		for _, b := range stateBuckets {
			buf := rankGrad(c.Rank(), 10*s+b.key, b.n)
			if _, err := codec.AllReduce(ctx, c, b.key, buf, b.segs); err != nil {
				return nil, fmt.Errorf("step %d, key %d: %w", s, b.key, err)
			}
			out = append(out, buf)
		}
	}
	return out, nil
}

// marshal is codec's saved state.
func marshal(codec Codec) ([]byte, error) {
	m, ok := codec.(encoding.BinaryMarshaler)
	if !ok {
		return nil, fmt.Errorf("%s keeps state but is no encoding.BinaryMarshaler", codec.Name())
	}
	return m.MarshalBinary()
}

// unmarshal restores codec's state from b.
func unmarshal(codec Codec, b []byte) error {
	u, ok := codec.(encoding.BinaryUnmarshaler)
	if !ok {
		return fmt.Errorf("%s keeps state but is no encoding.BinaryUnmarshaler", codec.Name())
	}
	return u.UnmarshalBinary(b)
}

// TestStateResumes: on 2 ranks, a codec made afresh and given another's
// saved state after 4 steps sends, at the next 2 steps, what the original
// sends, bit for bit, and then saves the same state; a codec made afresh
// without it does not (so the state is what makes the difference).
func TestStateResumes(t *testing.T) {
	for _, spec := range statefulSpecs {
		t.Run(spec, func(t *testing.T) {
			spmdtest.Run(t, 2, func(ctx context.Context, w *spmd.World) error {
				orig, _ := Parse(spec, 7)
				if _, err := stateSteps(ctx, w.Comm, orig, 0, 4); err != nil {
					return err
				}
				saved, err := marshal(orig)
				if err != nil {
					return err
				}
				restored, _ := Parse(spec, 7)
				if err := unmarshal(restored, saved); err != nil {
					return err
				}
				fresh, _ := Parse(spec, 7)
				want, err := stateSteps(ctx, w.Comm, orig, 4, 6)
				if err != nil {
					return err
				}
				got, err := stateSteps(ctx, w.Comm, restored, 4, 6)
				if err != nil {
					return err
				}
				without, err := stateSteps(ctx, w.Comm, fresh, 4, 6)
				if err != nil {
					return err
				}
				for i := range want {
					if !sameBits(got[i], want[i]) {
						return fmt.Errorf("call %d after the restore: got\n%v\nwant the original codec's\n%v", i, got[i], want[i])
					}
				}
				if slices.EqualFunc(without, want, sameBits) {
					return fmt.Errorf("a fresh codec sends what the original does: the test cannot tell a restored state from none")
				}
				a, _ := marshal(orig)
				b, _ := marshal(restored)
				if !bytes.Equal(a, b) {
					return fmt.Errorf("after 2 more steps the restored codec's state (%d bytes) differs from the original's (%d)", len(b), len(a))
				}
				return nil
			})
		})
	}
}

// savedStates runs every stateful codec 3 steps on one rank and returns
// their states by spec.
func savedStates(t testing.TB) map[string][]byte {
	t.Helper()
	states := map[string][]byte{}
	spmdtest.Run(t, 1, func(ctx context.Context, w *spmd.World) error {
		for _, spec := range statefulSpecs {
			codec, _ := Parse(spec, 7)
			if _, err := stateSteps(ctx, w.Comm, codec, 0, 3); err != nil {
				return err
			}
			b, err := marshal(codec)
			if err != nil {
				return err
			}
			states[spec] = b
		}
		return nil
	})
	return states
}

// TestStateRefused: a truncated, extended or altered state, or one that
// another codec saved, is refused with ErrCorrupt or ErrState, and the
// codec's state is left as it was.
func TestStateRefused(t *testing.T) {
	states := savedStates(t)
	other := map[string]func() (Codec, error){
		"topk:0.1 into topk:0.2":  func() (Codec, error) { return NewTopK(0.2) },
		"topk:0.1 into randk:0.1": func() (Codec, error) { return NewRandomK(0.1, 7) },
		"sign into qsgd:8":        func() (Codec, error) { return NewQSGD(8, 7) },
		"powersgd:2 into powersgd:3": func() (Codec, error) {
			return NewPowerSGD(PowerSGDConfig{Rank: 3, Seed: 7})
		},
		"powersgd:2 into powersgd:2 with MinCompression 4": func() (Codec, error) {
			return NewPowerSGD(PowerSGDConfig{Rank: 2, MinCompression: 4, Seed: 7})
		},
	}
	for name, newCodec := range other {
		spec := name[:bytes.IndexByte([]byte(name), ' ')]
		codec, err := newCodec()
		if err != nil {
			t.Fatal(err)
		}
		if err := unmarshal(codec, states[spec]); !errors.Is(err, ErrState) {
			t.Errorf("%s: %v, want an error wrapping ErrState", name, err)
		}
	}
	for _, spec := range statefulSpecs {
		saved := states[spec]
		codec, _ := Parse(spec, 7)
		if err := unmarshal(codec, saved); err != nil {
			t.Fatalf("%s: %v", spec, err)
		}
		check := func(what string, b []byte) {
			t.Helper()
			if err := unmarshal(codec, b); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("%s, %s: %v, want an error wrapping ErrCorrupt", spec, what, err)
			}
			if now, _ := marshal(codec); !bytes.Equal(now, saved) {
				t.Fatalf("%s, %s: the refused state changed the codec's", spec, what)
			}
		}
		for n := range len(saved) {
			check(fmt.Sprintf("cut to %d of %d bytes", n, len(saved)), saved[:n])
		}
		check("a byte added", append(slices.Clone(saved), 0))
		for i := range saved {
			b := slices.Clone(saved)
			b[i] ^= 0xff
			codec.(encoding.BinaryUnmarshaler).UnmarshalBinary(b) // must not panic
			if err := unmarshal(codec, saved); err != nil {
				t.Fatalf("%s: restoring after byte %d altered: %v", spec, i, err)
			}
		}
	}
}

// FuzzCodecState: no saved state makes a codec's UnmarshalBinary panic or
// allocate beyond its length, and one it takes saves again and restores
// to the same.
func FuzzCodecState(f *testing.F) {
	for _, b := range savedStates(f) {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, spec := range statefulSpecs {
			codec, _ := Parse(spec, 7)
			if unmarshal(codec, b) != nil {
				continue
			}
			again, err := marshal(codec)
			if err != nil {
				t.Fatal(err)
			}
			if err := unmarshal(codec, again); err != nil {
				t.Fatalf("%s: its own state refused: %v", spec, err)
			}
		}
	})
}
