package safetensors

import (
	"bytes"
	"errors"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// encode encodes tensors and metadata or fails the test.
func encode(t testing.TB, tensors []Tensor, metadata map[string]string) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := Encode(&b, tensors, metadata); err != nil {
		t.Fatalf("Encode: %v", err)
	}
	return b.Bytes()
}

// randomTensor returns a tensor of dtype d and the given shape holding
// random bytes (valid ones for BOOL).
func randomTensor(rng *rand.Rand, name string, d DType, shape []int) Tensor {
	n, _ := dataSize(shape, d)
	data := make([]byte, n)
	for i := range data {
		data[i] = byte(rng.UintN(256))
		if d == Bool {
			data[i] &= 1
		}
	}
	return Tensor{Name: name, DType: d, Shape: shape, Data: data}
}

// sameTensors reports how got differs from want, or "" if it does not.
func sameTensors(got, want []Tensor) string {
	if len(got) != len(want) {
		return "different numbers of tensors"
	}
	for i := range want {
		g, w := got[i], want[i]
		switch {
		case g.Name != w.Name:
			return "tensor " + w.Name + ": name " + g.Name
		case g.DType != w.DType:
			return "tensor " + w.Name + ": dtype " + g.DType.String()
		case !slices.Equal(g.Shape, w.Shape):
			return "tensor " + w.Name + ": shape differs"
		case !bytes.Equal(g.Data, w.Data):
			return "tensor " + w.Name + ": data differs"
		}
	}
	return ""
}

func TestRoundTripEveryDType(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	shapes := [][]int{nil, {1}, {3}, {2, 3}, {2, 0, 4}, {1, 2, 3, 2}}
	for _, d := range DTypes() {
		t.Run(d.String(), func(t *testing.T) {
			var tensors []Tensor
			for i, shape := range shapes {
				tensors = append(tensors, randomTensor(rng, d.String()+"."+string(rune('a'+i)), d, shape))
			}
			md := map[string]string{"dtype": d.String(), "format": "pt"}
			f, err := Decode(encode(t, tensors, md))
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if diff := sameTensors(f.Tensors, tensors); diff != "" {
				t.Fatal(diff)
			}
			if f.Metadata["dtype"] != d.String() || len(f.Metadata) != 2 {
				t.Fatalf("metadata %v", f.Metadata)
			}
			for _, want := range tensors {
				if got, ok := f.Tensor(want.Name); !ok || !bytes.Equal(got.Data, want.Data) {
					t.Fatalf("Tensor(%q) = %v, %v", want.Name, got, ok)
				}
			}
		})
	}
}

func TestRoundTripMixed(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var tensors []Tensor
	for i, d := range DTypes() {
		tensors = append(tensors, randomTensor(rng, "layer."+d.String(), d, []int{i + 1, 3}))
	}
	rng.Shuffle(len(tensors), func(i, j int) { tensors[i], tensors[j] = tensors[j], tensors[i] })
	f, err := Decode(encode(t, tensors, nil))
	if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	if diff := sameTensors(f.Tensors, tensors); diff != "" {
		t.Fatal(diff)
	}
	if f.Metadata != nil {
		t.Fatalf("metadata %v, want nil", f.Metadata)
	}
	if _, ok := f.Tensor("missing"); ok {
		t.Fatal(`Tensor("missing") found a tensor`)
	}
}

func TestFloat32s(t *testing.T) {
	want := []float32{0, 1, -2.5, float32(math.Inf(1)), math.SmallestNonzeroFloat32, math.MaxFloat32}
	f, err := Decode(encode(t, []Tensor{F32("w", []int{2, 3}, want)}, nil))
	if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	w, _ := f.Tensor("w")
	got, err := w.Float32s()
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("Float32s = %v, %v; want %v", got, err, want)
	}
	dst := make([]float32, len(want))
	if allocs := testing.AllocsPerRun(10, func() { _ = w.Float32sInto(dst) }); allocs != 0 {
		t.Errorf("Float32sInto allocates %v times", allocs)
	}
	if !slices.Equal(dst, want) {
		t.Fatalf("Float32sInto gave %v, want %v", dst, want)
	}
	if !bytes.Equal(w.Data[4:8], []byte{0, 0, 0x80, 0x3f}) {
		t.Fatalf("1.0 is stored as % x, want little-endian 00 00 80 3f", w.Data[4:8])
	}
}

func TestFloat32sErrors(t *testing.T) {
	f32 := F32("w", []int{3}, []float32{1, 2, 3})
	tests := []struct {
		name string
		call func() error
		want string
	}{
		{"wrong dtype", func() error {
			_, err := Tensor{Name: "i", DType: Int32, Shape: []int{1}, Data: make([]byte, 4)}.Float32s()
			return err
		}, `tensor "i" is I32, not F32`},
		{"ragged data", func() error {
			_, err := Tensor{Name: "r", DType: Float32, Data: make([]byte, 5)}.Float32s()
			return err
		}, `5 bytes of data`},
		{"short destination", func() error { return f32.Float32sInto(make([]float32, 2)) },
			`tensor "w" holds 3 values, destination has room for 2`},
		{"long destination", func() error { return f32.Float32sInto(make([]float32, 4)) },
			`destination has room for 4`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call()
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want ErrInvalid saying %q", err, tt.want)
			}
		})
	}
}

func TestEncodeRejects(t *testing.T) {
	ok := F32("ok", []int{2}, []float32{1, 2})
	tests := []struct {
		name    string
		tensors []Tensor
		md      map[string]string
		want    string
	}{
		{"short data", []Tensor{F32("fc1.weight", []int{2, 3}, []float32{1, 2, 3})}, nil,
			`tensor "fc1.weight" holds 12 bytes, shape [2 3] of F32 needs 24`},
		{"negative dimension", []Tensor{{Name: "n", DType: Uint8, Shape: []int{-1}}}, nil,
			`shape [-1] of U8 is negative or too large`},
		{"overflowing shape", []Tensor{{Name: "o", DType: Float64, Shape: []int{1 << 40, 1 << 40}}}, nil,
			`is negative or too large`},
		{"zero dtype", []Tensor{{Name: "z", Shape: []int{1}, Data: []byte{0}}}, nil,
			`unsupported dtype DType(0)`},
		{"duplicate name", []Tensor{ok, ok}, nil, `tensor "ok" appears twice`},
		{"reserved name", []Tensor{{Name: "__metadata__", DType: Uint8}}, nil, `reserved for the metadata`},
		{"invalid UTF-8 name", []Tensor{{Name: "\xff", DType: Uint8, Data: []byte{1}}}, nil, `not valid UTF-8`},
		{"invalid UTF-8 metadata", []Tensor{ok}, map[string]string{"k": "\xfe"}, `metadata "k"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b bytes.Buffer
			err := Encode(&b, tt.tensors, tt.md)
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want ErrInvalid saying %q", err, tt.want)
			}
			if b.Len() != 0 {
				t.Fatalf("Encode wrote %d bytes before failing", b.Len())
			}
		})
	}
}

func TestSort(t *testing.T) {
	tensors := []Tensor{
		{Name: "b", DType: Float32}, {Name: "mask", DType: Bool}, {Name: "a", DType: Float32},
		{Name: "step", DType: Int64}, {Name: "h", DType: BFloat16}, {Name: "g", DType: Float16},
		{Name: "x", DType: Float64}, {Name: "u", DType: Uint64},
	}
	Sort(tensors)
	var got []string
	for _, tt := range tensors {
		got = append(got, tt.Name)
	}
	want := []string{"u", "step", "x", "a", "b", "h", "g", "mask"}
	if !slices.Equal(got, want) {
		t.Fatalf("Sort gave %v, want %v", got, want)
	}
}

func BenchmarkEncode(b *testing.B) {
	tensors := []Tensor{F32("w", []int{1024, 1024}, make([]float32, 1<<20))}
	b.SetBytes(int64(len(tensors[0].Data)))
	for b.Loop() {
		if err := Encode(io.Discard, tensors, nil); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeFloat32s(b *testing.B) {
	data := encode(b, []Tensor{F32("w", []int{1024, 1024}, make([]float32, 1<<20))}, nil)
	dst := make([]float32, 1<<20)
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		f, err := Decode(data)
		if err != nil {
			b.Fatal(err)
		}
		if err := f.Tensors[0].Float32sInto(dst); err != nil {
			b.Fatal(err)
		}
	}
}
