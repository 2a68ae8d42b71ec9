package safetensors

import (
	"bytes"
	"os"
	"testing"
)

// TestReferenceFile reads a file that Python's safetensors 0.8.0 wrote
// (save_file of a 2x3 F32 arange, an I64 [7 8] and an F16 [1 1 1], with
// metadata k=v), and writes it again byte for byte.
func TestReferenceFile(t *testing.T) {
	raw, err := os.ReadFile("testdata/reference-0.8.0.safetensors")
	if err != nil {
		t.Fatal(err)
	}
	f, err := Decode(raw)
	if err != nil {
		t.Fatal(err)
	}
	a, ok := f.Tensor("a")
	if !ok {
		t.Fatal("no tensor a")
	}
	v, err := a.Float32s()
	if err != nil || len(v) != 6 || v[5] != 5 || len(a.Shape) != 2 || a.Shape[0] != 2 || a.Shape[1] != 3 {
		t.Errorf("a = %v %v, shape %v: want 0..5 in [2 3]", v, err, a.Shape)
	}
	if b, _ := f.Tensor("b"); b.DType != Int64 || !bytes.Equal(b.Data, []byte{7, 0, 0, 0, 0, 0, 0, 0, 8, 0, 0, 0, 0, 0, 0, 0}) {
		t.Errorf("b = %v %v, want I64 [7 8]", b.DType, b.Data)
	}
	if c, _ := f.Tensor("c"); c.DType != Float16 || !bytes.Equal(c.Data, []byte{0, 0x3c, 0, 0x3c, 0, 0x3c}) {
		t.Errorf("c = %v %x, want F16 ones", c.DType, c.Data)
	}
	if f.Metadata["k"] != "v" {
		t.Errorf("metadata %v, want k=v", f.Metadata)
	}
	ts := append([]Tensor(nil), f.Tensors...)
	Sort(ts)
	var out bytes.Buffer
	if err := Encode(&out, ts, f.Metadata); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out.Bytes(), raw) {
		t.Errorf("our encoding differs from the reference's:\n%q\n%q", out.Bytes()[:min(out.Len(), 200)], raw[:min(len(raw), 200)])
	}
}
