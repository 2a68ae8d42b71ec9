package compress

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"testing"

	"github.com/gorun-hpc/gorun/spmd"
	"github.com/gorun-hpc/gorun/spmd/spmdtest"
)

func TestEncodeSign(t *testing.T) {
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	for _, c := range []struct {
		name  string
		scale float32
		p     []float32
		want  []byte
	}{
		{"empty", 1, nil, []byte{0, 0, 0x80, 0x3f}},
		{"zero and -0 are +1", 1.5, []float32{1, -2, 0, -0, 3}, []byte{0, 0, 0xc0, 0x3f, 0x02}},
		{"a byte full", 2, []float32{-1, 1, -1, 1, -1, 1, -1, -1}, []byte{0, 0, 0, 0x40, 0xd5}},
		{"ninth element in the next byte", 2, []float32{1, 1, 1, 1, 1, 1, 1, 1, -1}, []byte{0, 0, 0, 0x40, 0, 0x01}},
		{"-0 scale is +0", float32(math.Copysign(0, -1)), []float32{-1}, []byte{0, 0, 0, 0, 0x01}},
		{"NaN scale is NaNScale", -nan, []float32{1}, []byte{0, 0, 0xc0, 0x7f, 0}},
		{"Inf scale is NaNScale", inf, []float32{1}, []byte{0, 0, 0xc0, 0x7f, 0}},
		{"negative scale is NaNScale", -1, []float32{1}, []byte{0, 0, 0xc0, 0x7f, 0}},
		{"NaN elements keep their sign bit", 1, []float32{nan, -nan}, []byte{0, 0, 0x80, 0x3f, 0x02}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := make([]byte, SignSize(len(c.p)))
			if err := EncodeSign(got, c.scale, c.p); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, c.want) {
				t.Fatalf("EncodeSign(%v, %v) = % x, want % x", c.scale, c.p, got, c.want)
			}
		})
	}
	if err := EncodeSign(make([]byte, 5), 1, make([]float32, 9)); err == nil {
		t.Fatal("EncodeSign into a short buffer: no error")
	}
}

// refSign is EF-SignSGD written out plainly.
type refSign struct{ res map[int][]float32 }

func (r *refSign) contrib(_, key int, _ uint64, g []float32) []float32 {
	p := addResidual(r.res, key, g)
	scale := float32(meanAbs(p)) // the codec's order of float64 sums
	out := make([]float32, len(p))
	for i, x := range p {
		out[i] = scale
		if x < 0 {
			out[i] = -scale
		}
		r.res[key][i] = x - out[i]
	}
	return out
}

// TestSignRanks sums the ranks' scaled signs on 2 and 4 ranks.
func TestSignRanks(t *testing.T) {
	for _, p := range []int{2, 4} {
		t.Run(fmt.Sprintf("p=%d", p), func(t *testing.T) {
			checkRanks(t, p, func() (Codec, error) { return NewSign(), nil },
				func() refCodec { return &refSign{map[int][]float32{}} },
				func(n, _ int) int64 { return int64(SignSize(n)) })
		})
	}
	if got := NewSign().Name(); got != "sign" {
		t.Fatalf("Name = %q, want sign", got)
	}
}

func BenchmarkSignEncode(b *testing.B) {
	p := benchGrad(16 << 20)
	dst := make([]byte, SignSize(len(p)))
	b.SetBytes(4 * int64(len(p)))
	for b.Loop() {
		EncodeSign(dst, 0.5, p)
	}
}

// BenchmarkSignDecode adds a decoded sign payload into a 16M bucket.
func BenchmarkSignDecode(b *testing.B) {
	p := benchGrad(16 << 20)
	wire := make([]byte, SignSize(len(p)))
	EncodeSign(wire, 0.5, p)
	b.SetBytes(4 * int64(len(p)))
	for b.Loop() {
		if err := AddSign(p, wire); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSign is the codec on one rank and a 16M bucket: error
// feedback, scale, encoding with the residual, and decoding.
func BenchmarkSign(b *testing.B) {
	benchCodec(b, func() (Codec, error) { return NewSign(), nil })
}

// TestSignSentIsScaledSign checks, on one rank, that the bucket comes
// back as ±mean|g| with g's signs.
func TestSignSentIsScaledSign(t *testing.T) {
	spmdtest.Run(t, 1, func(ctx context.Context, w *spmd.World) error {
		g := []float32{1, -3, 0, 4}
		buf := append([]float32(nil), g...)
		if _, err := NewSign().AllReduce(ctx, w.Comm, 0, buf, nil); err != nil {
			return err
		}
		if want := []float32{2, -2, 2, 2}; !sameBits(buf, want) {
			return fmt.Errorf("sent %v, want %v", buf, want)
		}
		return nil
	})
}
