package compress

import (
	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// pairs is a sparse payload of the given (index, value bits) pairs.
func pairs(p ...uint32) []byte {
	b := make([]byte, 4*len(p))
	for i, w := range p {
		binary.LittleEndian.PutUint32(b[4*i:], w)
	}
	return b
}

// withScale is a payload of the scale bits followed by rest.
func withScale(bits uint32, rest ...byte) []byte {
	return append(binary.LittleEndian.AppendUint32(nil, bits), rest...)
}

// TestPayloadCorrupt feeds each decoder payloads that no encoder writes
// and checks that it refuses them with ErrCorrupt and a message saying
// what was wrong.
func TestPayloadCorrupt(t *testing.T) {
	one := math.Float32bits(1)
	for _, c := range []struct {
		name    string
		decode  func() error
		wantMsg string
	}{
		{"sparse short", func() error { return AddSparse(make([]float32, 4), pairs(0, one)[:7], 1) }, "7 bytes"},
		{"sparse long", func() error { return AddSparse(make([]float32, 4), pairs(0, one, 1, one), 1) }, "16 bytes"},
		{"sparse negative k", func() error { return AddSparse(make([]float32, 4), nil, -1) }, "want -1 pairs"},
		{"sparse index n", func() error { return AddSparse(make([]float32, 4), pairs(4, one), 1) }, "index 4"},
		{"sparse index huge", func() error { return AddSparse(make([]float32, 4), pairs(0xffffffff, one), 1) }, "index 4294967295"},
		{"sparse repeated index", func() error { return AddSparse(make([]float32, 4), pairs(1, one, 1, one), 2) }, "index 1 after 1"},
		{"sparse decreasing", func() error { return AddSparse(make([]float32, 4), pairs(2, one, 1, one), 2) }, "index 1 after 2"},
		{"sparse into nothing", func() error { return AddSparse(nil, pairs(0, one), 1) }, "below 0"},
		{"sign short", func() error { return AddSign(make([]float32, 9), withScale(one, 0)) }, "5 bytes, want 6"},
		{"sign long", func() error { return AddSign(make([]float32, 8), withScale(one, 0, 0)) }, "6 bytes, want 5"},
		{"sign no scale", func() error { return AddSign(nil, nil) }, "0 bytes, want 4"},
		{"sign negative scale", func() error { return AddSign(make([]float32, 1), withScale(math.Float32bits(-1), 0)) }, "scale is -1"},
		{"sign -0 scale", func() error { return AddSign(make([]float32, 1), withScale(1<<31, 0)) }, "scale is -0"},
		{"sign Inf scale", func() error { return AddSign(make([]float32, 1), withScale(0x7f800000, 0)) }, "scale is +Inf"},
		{"sign other NaN", func() error { return AddSign(make([]float32, 1), withScale(0x7fc00001, 0)) }, "scale is NaN"},
		{"sign padding bit", func() error { return AddSign(make([]float32, 3), withScale(one, 0x08)) }, "past element 3"},
		{"qsgd short", func() error { return AddQSGD(make([]float32, 2), withScale(one, 0), 4) }, "5 bytes, want 6"},
		{"qsgd no norm", func() error { return AddQSGD(nil, []byte{1}, 4) }, "1 bytes, want 4"},
		{"qsgd negative norm", func() error { return AddQSGD(make([]float32, 1), withScale(math.Float32bits(-2), 0), 4) }, "norm is -2"},
		{"qsgd Inf norm", func() error { return AddQSGD(make([]float32, 1), withScale(0xff800000, 0), 4) }, "norm is -Inf"},
		{"qsgd level above s", func() error { return AddQSGD(make([]float32, 2), withScale(one, 4, 5), 4) }, "element 1 has byte 0x05"},
		{"qsgd negative level above s", func() error { return AddQSGD(make([]float32, 1), withScale(one, 0x85), 4) }, "byte 0x85"},
		{"qsgd signed zero", func() error { return AddQSGD(make([]float32, 1), withScale(one, 0x80), 4) }, "byte 0x80"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := c.decode()
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), c.wantMsg) {
				t.Fatalf("err %v, want ErrCorrupt saying %q", err, c.wantMsg)
			}
		})
	}
	for _, s := range []int{0, 128} {
		if err := AddQSGD(make([]float32, 1), withScale(one, 0), s); err == nil || errors.Is(err, ErrCorrupt) {
			t.Errorf("AddQSGD with %d levels: err %v, want a plain error about the levels", s, err)
		}
	}
}

// TestPayloadDecode decodes valid payloads, adding into what dst held.
func TestPayloadDecode(t *testing.T) {
	nan := float32(math.NaN())
	for _, c := range []struct {
		name   string
		decode func(dst []float32) error
		dst    []float32
		want   []float32
	}{
		{"sparse", func(d []float32) error {
			return AddSparse(d, pairs(0, math.Float32bits(2), 3, math.Float32bits(-1)), 2)
		},
			[]float32{1, 1, 1, 1}, []float32{3, 1, 1, 0}},
		{"sparse none", func(d []float32) error { return AddSparse(d, nil, 0) }, []float32{1}, []float32{1}},
		{"sparse NaN value", func(d []float32) error { return AddSparse(d, pairs(1, math.Float32bits(nan)), 1) },
			[]float32{0, 0}, []float32{0, nan}},
		{"sign", func(d []float32) error { return AddSign(d, withScale(math.Float32bits(0.5), 0x05)) },
			[]float32{1, 1, 1}, []float32{0.5, 1.5, 0.5}},
		{"sign nine", func(d []float32) error { return AddSign(d, withScale(math.Float32bits(1), 0xff, 0x01)) },
			make([]float32, 9), []float32{-1, -1, -1, -1, -1, -1, -1, -1, -1}},
		{"sign NaNScale", func(d []float32) error { return AddSign(d, withScale(NaNScale, 0x01)) },
			[]float32{1, 1}, []float32{nan, nan}},
		{"qsgd", func(d []float32) error { return AddQSGD(d, withScale(math.Float32bits(3), 0, 1, 0x82, 3), 3) },
			[]float32{1, 1, 1, 1}, []float32{1, 2, -1, 4}},
		{"qsgd NaNScale", func(d []float32) error { return AddQSGD(d, withScale(NaNScale, 0, 1), 3) },
			[]float32{1, 1}, []float32{nan, nan}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if err := c.decode(c.dst); err != nil {
				t.Fatal(err)
			}
			for i := range c.want {
				if !same(c.dst[i], c.want[i]) && !(c.dst[i] != c.dst[i] && c.want[i] != c.want[i]) {
					t.Fatalf("dst %v, want %v", c.dst, c.want)
				}
			}
		})
	}
}

func TestPayloadEncodeSparse(t *testing.T) {
	p := []float32{5, -6, 7}
	got := make([]byte, SparseSize(2))
	if err := EncodeSparse(got, []uint32{0, 2}, p); err != nil {
		t.Fatal(err)
	}
	if want := pairs(0, math.Float32bits(5), 2, math.Float32bits(7)); string(got) != string(want) {
		t.Fatalf("got % x, want % x", got, want)
	}
	for _, idx := range [][]uint32{{2, 0}, {1, 1}, {0, 3}} {
		if err := EncodeSparse(got, idx, p); err == nil {
			t.Errorf("EncodeSparse(%v): no error", idx)
		}
	}
	if err := EncodeSparse(got, []uint32{0}, p); err == nil {
		t.Error("EncodeSparse of 1 pair into 16 bytes: no error")
	}
}

// The fuzz targets decode any bytes into a bucket of n elements (n from
// the fuzzer too); the decoders must not panic, and what they accept
// must be what an encoder could have written.

func FuzzDecodeSparse(f *testing.F) {
	p := []float32{1, -2, 3, 0, float32(math.NaN()), 6, 7, 8}
	for _, idx := range [][]uint32{{}, {0}, {1, 4, 7}, {0, 1, 2, 3, 4, 5, 6, 7}} {
		b := make([]byte, SparseSize(len(idx)))
		EncodeSparse(b, idx, p)
		f.Add(b, uint16(len(p)), uint16(len(idx)))
	}
	f.Fuzz(func(t *testing.T, b []byte, n, k uint16) {
		dst := make([]float32, n)
		if err := AddSparse(dst, b, int(k)); err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v does not wrap ErrCorrupt", err)
			}
			return
		}
		idx := make([]uint32, k)
		for j := range idx {
			idx[j] = binary.LittleEndian.Uint32(b[8*j:])
		}
		again := make([]byte, len(b))
		if err := EncodeSparse(again, idx, dst); err != nil {
			t.Fatalf("accepted a payload whose indices %v the encoder refuses: %v", idx, err)
		}
		for j := range idx { // compare values by bits: 0 + -0 is +0, and NaN payloads may change
			if a, w := binary.LittleEndian.Uint32(again[8*j+4:]), binary.LittleEndian.Uint32(b[8*j+4:]); a != w && !(a == 0 && w == 1<<31) && (a&0x7fffffff <= 0x7f800000 || w&0x7fffffff <= 0x7f800000) {
				t.Fatalf("pair %d decoded to %#08x, payload had %#08x", j, a, w)
			}
		}
	})
}

func FuzzDecodeSign(f *testing.F) {
	for _, n := range []int{0, 1, 7, 8, 9, 20} {
		p := benchGrad(n)
		b := make([]byte, SignSize(n))
		EncodeSign(b, 0.25, p)
		f.Add(b, uint16(n))
	}
	f.Add(withScale(NaNScale, 0x01), uint16(1))
	f.Fuzz(func(t *testing.T, b []byte, n uint16) {
		dst := make([]float32, n)
		if err := AddSign(dst, b); err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v does not wrap ErrCorrupt", err)
			}
			return
		}
		scale := math.Float32frombits(binary.LittleEndian.Uint32(b))
		if scale != scale || scale == 0 {
			return // the signs do not survive decoding
		}
		again := make([]byte, len(b))
		EncodeSign(again, scale, dst)
		if string(again) != string(b) {
			t.Fatalf("decoded %v, which encodes to % x, not % x", dst, again, b)
		}
	})
}

func FuzzDecodeQSGD(f *testing.F) {
	for _, c := range []struct{ n, s int }{{0, 1}, {1, 4}, {9, 8}, {30, 127}} {
		b := make([]byte, QSGDSize(c.n))
		EncodeQSGD(b, c.s, benchGrad(c.n), rand.NewPCG(1, 2))
		f.Add(b, uint16(c.n), uint8(c.s))
	}
	f.Fuzz(func(t *testing.T, b []byte, n uint16, s uint8) {
		dst := make([]float32, n)
		err := AddQSGD(dst, b, int(s))
		if s < 1 || s > MaxQSGDLevels {
			if err == nil {
				t.Fatalf("%d levels accepted", s)
			}
			return
		}
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v does not wrap ErrCorrupt", err)
			}
			return
		}
		norm := math.Float32frombits(binary.LittleEndian.Uint32(b))
		for i, v := range dst {
			if norm == norm && !(math.Abs(float64(v)) <= float64(norm)) {
				t.Fatalf("element %d decoded to %v, above the norm %v", i, v, norm)
			}
		}
	})
}
