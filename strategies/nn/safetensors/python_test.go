package safetensors

import (
	"bytes"
	"context"
	"encoding/json"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// python returns the path of python3, or skips the test when there is none.
func python(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 is not on PATH; skipping the Python interop test")
	}
	return path
}

// runPython runs a Python script with args and returns what it printed.
func runPython(t *testing.T, script string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, python(t), append([]string{"-c", script}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("python3: %v\n%s", err, stderr.Bytes())
	}
	return out
}

// pyRead parses the file argv[1] with the standard library only and prints
// what it found as JSON. BF16 is widened to F32 by hand; struct has no
// format for it.
const pyRead = `
import json, struct, sys
FMT = {"BOOL": "?", "U8": "B", "I8": "b", "I16": "h", "U16": "H", "F16": "e", "BF16": "H",
       "I32": "i", "U32": "I", "F32": "f", "F64": "d", "I64": "q", "U64": "Q"}
raw = open(sys.argv[1], "rb").read()
(n,) = struct.unpack("<Q", raw[:8])
text = raw[8:8 + n].decode("utf-8")
header = json.loads(text)
buf = raw[8 + n:]
out = {"n": n, "padding": len(text) - len(text.rstrip(" ")), "order": list(header),
       "metadata": header.pop("__metadata__", {}), "tensors": {}}
for name, info in header.items():
    b, e = info["data_offsets"]
    fmt = FMT[info["dtype"]]
    vals = struct.unpack("<%d%s" % ((e - b) // struct.calcsize(fmt), fmt), buf[b:e])
    if info["dtype"] == "BF16":
        vals = [struct.unpack("<f", struct.pack("<I", v << 16))[0] for v in vals]
    out["tensors"][name] = {"dtype": info["dtype"], "shape": info["shape"], "values": [float(v) for v in vals]}
json.dump(out, sys.stdout)
`

// pyWrite writes argv[1] with the standard library only, by the format's
// rules and in the reference writer's layout.
const pyWrite = `
import json, struct, sys
ALIGN = ["BOOL", "U8", "I8", "I16", "U16", "F16", "BF16", "I32", "U32", "F32", "F64", "I64", "U64"]
tensors = {
    "fc1.weight": ("F32", [2, 2], struct.pack("<4f", 1.0, 2.5, -3.0, 0.125)),
    "fc1.bias": ("F32", [2], struct.pack("<2f", 0.5, -0.5)),
    "step": ("I64", [], struct.pack("<q", -9)),
    "half": ("F16", [2], struct.pack("<2e", 0.5, -1.25)),
    "mask": ("BOOL", [3], bytes([1, 0, 1])),
    "ids": ("U16", [2], struct.pack("<2H", 7, 65535)),
}
order = sorted(tensors, key=lambda k: (-ALIGN.index(tensors[k][0]), k))
header = {"__metadata__": {"format": "pt", "written_by": "python"}}
off = 0
for name in order:
    dtype, shape, data = tensors[name]
    header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [off, off + len(data)]}
    off += len(data)
hb = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
hb += b" " * (-len(hb) % 8)
with open(sys.argv[1], "wb") as f:
    f.write(struct.pack("<Q", len(hb)) + hb)
    for name in order:
        f.write(tensors[name][2])
`

// pyReport is what pyRead prints.
type pyReport struct {
	N        int               `json:"n"`
	Padding  int               `json:"padding"`
	Order    []string          `json:"order"`
	Metadata map[string]string `json:"metadata"`
	Tensors  map[string]struct {
		DType  string    `json:"dtype"`
		Shape  []int     `json:"shape"`
		Values []float64 `json:"values"`
	} `json:"tensors"`
}

func TestPythonReadsOurFile(t *testing.T) {
	python(t)
	type want struct {
		tensor Tensor
		values []float64
	}
	wants := []want{
		{F32("fc1.weight", []int{2, 3}, []float32{1, -2, 3.5, 0.25, 1e-3, 6}), []float64{1, -2, 3.5, 0.25, float64(float32(1e-3)), 6}},
		{Tensor{Name: "scale", DType: Float64, Data: []byte{0, 0, 0, 0, 0, 0, 0xf8, 0x3f}}, []float64{1.5}},
		{Tensor{Name: "step", DType: Int64, Shape: []int{1}, Data: []byte{0xf7, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}}, []float64{-9}},
		{Tensor{Name: "half", DType: Float16, Shape: []int{2}, Data: []byte{0x00, 0x3e, 0x00, 0xc0}}, []float64{1.5, -2}},
		{Tensor{Name: "bf", DType: BFloat16, Shape: []int{1, 1}, Data: []byte{0x80, 0x3f}}, []float64{1}},
		{Tensor{Name: "mask", DType: Bool, Shape: []int{3}, Data: []byte{1, 0, 1}}, []float64{1, 0, 1}},
		{Tensor{Name: "empty", DType: Uint8, Shape: []int{0}}, []float64{}},
	}
	var tensors []Tensor
	for _, w := range wants {
		tensors = append(tensors, w.tensor)
	}
	md := map[string]string{"format": "pt", "note": "h\u00e9llo \"q\"\n"}
	path := filepath.Join(t.TempDir(), "ours.safetensors")
	if err := WriteFile(path, tensors, md); err != nil {
		t.Fatal(err)
	}
	var got pyReport
	if err := json.Unmarshal(runPython(t, pyRead, path), &got); err != nil {
		t.Fatalf("python3's report: %v", err)
	}
	if got.N%8 != 0 || got.Padding > 7 {
		t.Errorf("header of %d bytes with %d bytes of padding; want a multiple of 8 padded with under 8 spaces", got.N, got.Padding)
	}
	wantOrder := append([]string{metadataKey}, names(tensors)...)
	if !slices.Equal(got.Order, wantOrder) {
		t.Errorf("header keys %q, want %q", got.Order, wantOrder)
	}
	if !maps.Equal(got.Metadata, md) {
		t.Errorf("metadata %q, want %q", got.Metadata, md)
	}
	for _, w := range wants {
		g := got.Tensors[w.tensor.Name]
		if g.DType != w.tensor.DType.String() || !slices.Equal(g.Shape, w.tensor.Shape) || !slices.Equal(g.Values, w.values) {
			t.Errorf("python3 read %q as %+v, want %v %v %v", w.tensor.Name, g, w.tensor.DType, w.tensor.Shape, w.values)
		}
	}
}

func TestWeReadPythonFile(t *testing.T) {
	python(t)
	path := filepath.Join(t.TempDir(), "theirs.safetensors")
	runPython(t, pyWrite, path)
	f, err := ReadFile(path)
	if err != nil {
		t.Fatalf("ReadFile: %v", err)
	}
	wantOrder := []string{"step", "fc1.bias", "fc1.weight", "half", "ids", "mask"}
	if got := names(f.Tensors); !slices.Equal(got, wantOrder) {
		t.Errorf("tensors %q, want %q", got, wantOrder)
	}
	w, _ := f.Tensor("fc1.weight")
	if v, err := w.Float32s(); err != nil || !slices.Equal(v, []float32{1, 2.5, -3, 0.125}) || !slices.Equal(w.Shape, []int{2, 2}) {
		t.Errorf("fc1.weight: %v %v, %v", w.Shape, v, err)
	}
	raw := map[string][]byte{
		"step": {0xf7, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff},
		"half": {0x00, 0x38, 0x00, 0xbd}, // 0.5, -1.25
		"ids":  {7, 0, 0xff, 0xff},
		"mask": {1, 0, 1},
	}
	for name, want := range raw {
		if got, ok := f.Tensor(name); !ok || !bytes.Equal(got.Data, want) {
			t.Errorf("%s: % x, want % x", name, got.Data, want)
		}
	}
	if want := map[string]string{"format": "pt", "written_by": "python"}; !maps.Equal(f.Metadata, want) {
		t.Errorf("metadata %q, want %q", f.Metadata, want)
	}

	// Laid out by Sort, our encoding of the same tensors is the same file.
	tensors := slices.Clone(f.Tensors)
	rand.Shuffle(len(tensors), func(i, j int) { tensors[i], tensors[j] = tensors[j], tensors[i] })
	Sort(tensors)
	theirs, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if ours := encode(t, tensors, f.Metadata); !bytes.Equal(ours, theirs) {
		t.Errorf("our encoding differs from Python's:\nours   %q\ntheirs %q", ours, theirs)
	}
}

// names lists the tensors' names.
func names(tensors []Tensor) []string {
	var out []string
	for _, t := range tensors {
		out = append(out, t.Name)
	}
	return out
}
