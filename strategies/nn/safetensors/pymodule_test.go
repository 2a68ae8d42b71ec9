package safetensors

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"testing"
)

// pyModule reads argv[1] with the safetensors module's deserialize and
// writes the tensors described in argv[3] to argv[2] with its serialize,
// through TensorSpec where the module has it (0.8 on) and through dicts of
// bytes before.
const pyModule = `
import ctypes, json, sys
import safetensors
out = {"version": safetensors.__version__, "tensors": {}}
for name, t in safetensors.deserialize(open(sys.argv[1], "rb").read()):
    out["tensors"][name] = {"dtype": t["dtype"], "shape": list(t["shape"]), "data": bytes(t["data"]).hex()}
spec = json.loads(sys.argv[3])
keep = []
def tensor(dtype, shape, data):
    if hasattr(safetensors, "TensorSpec"):
        buf = ctypes.create_string_buffer(data, max(len(data), 1))
        keep.append(buf)
        return safetensors.TensorSpec(dtype=dtype, shape=shape, data_ptr=ctypes.addressof(buf), data_len=len(data))
    return {"dtype": dtype, "shape": shape, "data": data}
tensors = {name: tensor(t["dtype"], t["shape"], bytes.fromhex(t["data"])) for name, t in spec["tensors"].items()}
with open(sys.argv[2], "wb") as f:
    f.write(safetensors.serialize(tensors, spec["metadata"]))
json.dump(out, sys.stdout)
`

// oldVersion matches the safetensors versions before 0.3.1, whose files
// are valid but laid out otherwise.
var oldVersion = regexp.MustCompile(`^0\.([0-2]\.|3\.0($|[^0-9]))`)

// pyDTypes names each DType as the safetensors module's serialize does.
var pyDTypes = map[DType]string{
	Bool: "bool", Uint8: "uint8", Int8: "int8", Int16: "int16", Uint16: "uint16",
	Float16: "float16", BFloat16: "bfloat16", Int32: "int32", Uint32: "uint32",
	Float32: "float32", Float64: "float64", Int64: "int64", Uint64: "uint64",
}

type pyTensor struct {
	DType string `json:"dtype"`
	Shape []int  `json:"shape"`
	Data  string `json:"data"` // hex
}

// TestPythonSafetensorsModule checks our files against the reference
// implementation itself, where Python's safetensors module is installed:
// it reads our file, and its file for the same tensors is byte for byte the
// one we write after Sort.
func TestPythonSafetensorsModule(t *testing.T) {
	py := python(t)
	if err := exec.Command(py, "-c", "import safetensors").Run(); err != nil {
		t.Skip("the Python safetensors module is not installed; skipping the test against it")
	}
	rng := rand.New(rand.NewPCG(7, 8))
	var tensors []Tensor
	spec := struct {
		Tensors  map[string]pyTensor `json:"tensors"`
		Metadata map[string]string   `json:"metadata"`
	}{map[string]pyTensor{}, map[string]string{"format": "pt"}}
	for i, d := range DTypes() {
		tensor := randomTensor(rng, "layers."+string(rune('a'+i))+".w", d, []int{2, i%3 + 1})
		tensors = append(tensors, tensor)
		spec.Tensors[tensor.Name] = pyTensor{pyDTypes[d], tensor.Shape, hex.EncodeToString(tensor.Data)}
	}
	tensors = append(tensors, Tensor{Name: "scalar", DType: Float32, Data: []byte{0, 0, 0x80, 0x3f}})
	spec.Tensors["scalar"] = pyTensor{"float32", []int{}, "0000803f"}

	dir := t.TempDir()
	ours, theirs := filepath.Join(dir, "ours.safetensors"), filepath.Join(dir, "theirs.safetensors")
	if err := WriteFile(ours, tensors, spec.Metadata); err != nil {
		t.Fatal(err)
	}
	specJSON, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Version string              `json:"version"`
		Tensors map[string]pyTensor `json:"tensors"`
	}
	if err := json.Unmarshal(runPython(t, pyModule, ours, theirs, string(specJSON)), &got); err != nil {
		t.Fatalf("python3's report: %v", err)
	}
	for _, want := range tensors {
		g := got.Tensors[want.Name]
		if g.DType != want.DType.String() || !slices.Equal(g.Shape, want.Shape) || g.Data != hex.EncodeToString(want.Data) {
			t.Errorf("safetensors %s read %q as %+v", got.Version, want.Name, g)
		}
	}

	f, err := ReadFile(theirs)
	if err != nil {
		t.Fatalf("safetensors %s wrote a file we reject: %v", got.Version, err)
	}
	Sort(tensors)
	if diff := sameTensors(f.Tensors, tensors); diff != "" {
		t.Fatalf("safetensors %s wrote a file we read differently: %s", got.Version, diff)
	}
	var b bytes.Buffer
	if err := Encode(&b, tensors, spec.Metadata); err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(theirs)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b.Bytes(), want) {
		if oldVersion.MatchString(got.Version) { // 0.3.0 padded the header wrongly, 0.2 ordered it by name
			t.Logf("safetensors %s writes other bytes than we do, as versions before 0.3.1 did", got.Version)
			return
		}
		t.Errorf("safetensors %s wrote other bytes than we do:\nours   %q\ntheirs %q", got.Version, b.Bytes(), want)
	}
}
