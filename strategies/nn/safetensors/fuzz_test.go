package safetensors

import (
	"bytes"
	"errors"
	"maps"
	"math/rand/v2"
	"testing"
)

// FuzzDecode checks that Decode never panics on any input, that everything
// it rejects is an ErrFormat, and that whatever it accepts encodes again and
// decodes to the same tensors and metadata.
func FuzzDecode(f *testing.F) {
	rng := rand.New(rand.NewPCG(5, 6))
	var all []Tensor
	for i, d := range DTypes() {
		all = append(all, randomTensor(rng, "t"+d.String(), d, []int{i % 3, 2}))
	}
	seeds := [][]Tensor{nil, checkpoint(1), all, {{Name: "", DType: Bool, Data: []byte{1}}}}
	for _, tensors := range seeds {
		var b bytes.Buffer
		if err := Encode(&b, tensors, map[string]string{"format": "pt", "k\n": "\"v\""}); err != nil {
			f.Fatal(err)
		}
		f.Add(b.Bytes())
	}
	f.Add(rawFile(`{"b":{"dtype":"U8","shape":[2,3],"data_offsets":[2,8]},"a":{"data_offsets":[0,2],"shape":[1,2],"dtype":"I8"}}`,
		[]byte{1, 2, 3, 4, 5, 6, 7, 8}))
	f.Add(rawFile(`{"__metadata__":null,"e":{"dtype":"F64","shape":[0],"data_offsets":[0,0]}}`, nil))
	f.Add(rawFile(`{"a":{"dtype":"F32","shape":[2,3],"data_offsets":[0,12]}}`, make([]byte, 12)))
	f.Add(withLength(1<<40, "{}"))
	f.Add([]byte{})

	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := Decode(data)
		if err != nil {
			if !errors.Is(err, ErrFormat) {
				t.Fatalf("error %v does not wrap ErrFormat", err)
			}
			return
		}
		var b bytes.Buffer
		if err := Encode(&b, file.Tensors, file.Metadata); err != nil {
			t.Fatalf("Decode accepted a file that does not encode again: %v", err)
		}
		again, err := Decode(b.Bytes())
		if err != nil {
			t.Fatalf("Decode rejects what Encode wrote: %v", err)
		}
		if diff := sameTensors(again.Tensors, file.Tensors); diff != "" {
			t.Fatalf("re-encoding changed the tensors: %s", diff)
		}
		if !maps.Equal(again.Metadata, file.Metadata) {
			t.Fatalf("re-encoding changed the metadata: %v, was %v", again.Metadata, file.Metadata)
		}
		for _, tensor := range file.Tensors {
			if got, ok := file.Tensor(tensor.Name); !ok || got.Name != tensor.Name {
				t.Fatalf("Tensor(%q) = %v, %v", tensor.Name, got, ok)
			}
		}
	})
}
