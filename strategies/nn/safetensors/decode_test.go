package safetensors

import (
	"encoding/binary"
	"errors"
	"slices"
	"strings"
	"testing"
)

// rawFile builds a file from a header as written, without padding, and the
// data buffer.
func rawFile(header string, buf []byte) []byte {
	out := binary.LittleEndian.AppendUint64(nil, uint64(len(header)))
	return append(append(out, header...), buf...)
}

// withLength builds a file whose length prefix is n, followed by rest.
func withLength(n uint64, rest string) []byte {
	return append(binary.LittleEndian.AppendUint64(nil, n), rest...)
}

func TestDecodeRejects(t *testing.T) {
	f32 := func(name, shape, offs string) string {
		return `"` + name + `":{"dtype":"F32","shape":` + shape + `,"data_offsets":` + offs + `}`
	}
	buf := make([]byte, 24)
	tests := []struct {
		name string
		data []byte
		want string
	}{
		{"empty", nil, "truncated: 0 bytes, too short for the 8-byte header length"},
		{"short length", []byte{1, 0, 0}, "truncated: 3 bytes"},
		{"header over the limit", withLength(100_000_001, "{}"), "header length 100000001 is over the limit"},
		{"huge header length", withLength(1<<63, "{}"), "is over the limit"},
		{"header past the end", withLength(4096, "{}"), "truncated: header length says 4096 bytes, file has 2"},
		{"empty header", withLength(0, ""), "the header is not a JSON object"},
		{"not UTF-8", rawFile("{\"\xff\":1}", nil), "the header is not valid UTF-8"},
		{"not JSON", rawFile("nope", nil), "the header is not a JSON object"},
		{"array", rawFile("[]", nil), "the header is not a JSON object"},
		{"null", rawFile("null", nil), "the header is not a JSON object"},
		{"unclosed", rawFile(`{"a":{"dtype":"U8","shape":[],"data_offsets":[0,1]}`, []byte{1}), "the header is not valid JSON"},
		{"trailing object", rawFile("{}{}", nil), "more after its JSON object"},
		{"padded with NULs", rawFile("{}\x00\x00", nil), "more after its JSON object"},
		{"duplicate tensor", rawFile("{"+f32("a", "[1]", "[0,4]")+","+f32("a", "[1]", "[4,8]")+"}", buf[:8]),
			`the header names "a" twice`},
		{"duplicate metadata", rawFile(`{"__metadata__":{},"__metadata__":{}}`, nil), `names "__metadata__" twice`},
		{"metadata array", rawFile(`{"__metadata__":[]}`, nil), `__metadata__ is "[", not an object of strings`},
		{"metadata number", rawFile(`{"__metadata__":{"epoch":3}}`, nil), `__metadata__: "epoch" is the number 3, not a string`},
		{"metadata duplicate key", rawFile(`{"__metadata__":{"k":"1","k":"2"}}`, nil), `__metadata__ names "k" twice`},
		{"entry not object", rawFile(`{"a":[0,4]}`, buf[:4]), `tensor "a": not an object`},
		{"unknown field", rawFile(`{"a":{"dtype":"U8","shape":[],"data_offsets":[0,1],"x":1}}`, buf[:1]),
			`tensor "a": unknown field "x"`},
		{"field case", rawFile(`{"a":{"DTYPE":"U8","shape":[],"data_offsets":[0,1]}}`, buf[:1]), `unknown field "DTYPE"`},
		{"duplicate field", rawFile(`{"a":{"dtype":"U8","dtype":"U8","shape":[],"data_offsets":[0,1]}}`, buf[:1]),
			`tensor "a": field "dtype" appears twice`},
		{"no dtype", rawFile(`{"a":{"shape":[],"data_offsets":[0,1]}}`, buf[:1]), `tensor "a": no dtype`},
		{"no shape", rawFile(`{"a":{"dtype":"U8","data_offsets":[0,1]}}`, buf[:1]), `tensor "a": no shape`},
		{"no offsets", rawFile(`{"a":{"dtype":"U8","shape":[]}}`, buf[:1]), `tensor "a": no data_offsets`},
		{"unknown dtype", rawFile(`{"a":{"dtype":"F8_E4M3","shape":[1],"data_offsets":[0,1]}}`, buf[:1]),
			`tensor "a": unknown or unsupported dtype "F8_E4M3" (supported: BOOL, U8`},
		{"lowercase dtype", rawFile(`{"a":{"dtype":"f32","shape":[1],"data_offsets":[0,4]}}`, buf[:4]), `dtype "f32"`},
		{"dtype number", rawFile(`{"a":{"dtype":7,"shape":[1],"data_offsets":[0,4]}}`, buf[:4]), `dtype is the number 7, not a string`},
		{"negative dimension", rawFile("{"+f32("a", "[-1]", "[0,4]")+"}", buf[:4]), `tensor "a": shape holds -1, not a non-negative`},
		{"fractional dimension", rawFile("{"+f32("a", "[1.0]", "[0,4]")+"}", buf[:4]), `shape holds 1.0`},
		{"string dimension", rawFile("{"+f32("a", `["1"]`, "[0,4]")+"}", buf[:4]), `shape holds the string "1"`},
		{"shape not array", rawFile("{"+f32("a", "1", "[0,4]")+"}", buf[:4]), `tensor "a": shape is not an array`},
		{"dimension over int", rawFile("{"+f32("a", "[10000000000000000000]", "[0,4]")+"}", buf[:4]),
			`shape dimension 10000000000000000000 is too large`},
		{"dimension over uint64", rawFile("{"+f32("a", "[100000000000000000000]", "[0,4]")+"}", buf[:4]),
			`not a non-negative 64-bit integer`},
		{"size overflows", rawFile("{"+f32("a", "[4294967296,4294967296,4]", "[0,4]")+"}", buf[:4]),
			`tensor "a": shape [4294967296 4294967296 4] of F32 is too large`},
		{"three offsets", rawFile("{"+f32("a", "[1]", "[0,4,8]")+"}", buf[:8]), `data_offsets has 3 numbers`},
		{"one offset", rawFile("{"+f32("a", "[1]", "[4]")+"}", buf[:4]), `data_offsets has 1 numbers`},
		{"negative offset", rawFile("{"+f32("a", "[1]", "[-4,0]")+"}", buf[:4]), `data_offsets holds -4`},
		{"offsets reversed", rawFile("{"+f32("a", "[1]", "[8,4]")+"}", buf[:8]), `data_offsets [8, 4] end before they begin`},
		{"size mismatch", rawFile("{"+f32("fc1.weight", "[2,3]", "[0,12]")+"}", buf[:12]),
			`tensor "fc1.weight": data_offsets [0, 12] hold 12 bytes, shape [2 3] of F32 needs 24`},
		{"gap at start", rawFile("{"+f32("a", "[1]", "[4,8]")+"}", buf[:8]), `tensor "a": data_offsets [4, 8] leave bytes [0, 4) of the data unused`},
		{"gap between", rawFile("{"+f32("a", "[1]", "[0,4]")+","+f32("b", "[1]", "[8,12]")+"}", buf[:12]),
			`tensor "b": data_offsets [8, 12] leave bytes [4, 8)`},
		{"overlap", rawFile("{"+f32("a", "[2]", "[0,8]")+","+f32("b", "[1]", "[4,8]")+"}", buf[:8]),
			`tensor "b": data_offsets [4, 8] overlap tensor "a" at [0, 8]`},
		{"same range twice", rawFile("{"+f32("a", "[1]", "[0,4]")+","+f32("b", "[1]", "[0,4]")+"}", buf[:4]),
			`tensor "b": data_offsets [0, 4] overlap tensor "a"`},
		{"truncated data", rawFile("{"+f32("a", "[2,3]", "[0,24]")+"}", buf[:20]), `truncated: header says 24 bytes of data, file has 20`},
		{"no data", rawFile("{"+f32("a", "[1]", "[0,4]")+"}", nil), `truncated: header says 4 bytes of data, file has 0`},
		{"data past the tensors", rawFile("{"+f32("a", "[1]", "[0,4]")+"}", buf[:6]),
			`2 bytes of data follow the last tensor (header says 4 bytes of data, file has 6)`},
		{"data with no tensors", rawFile("{}", buf[:1]), `1 bytes of data follow the last tensor`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := Decode(tt.data)
			if err == nil {
				t.Fatalf("Decode accepted it: %+v", f)
			}
			if !errors.Is(err, ErrFormat) {
				t.Errorf("error %v does not wrap ErrFormat", err)
			}
			if msg := err.Error(); !strings.HasPrefix(msg, "safetensors: ") || !strings.Contains(msg, tt.want) {
				t.Errorf("error %q, want it to say %q", msg, tt.want)
			}
		})
	}
}

func TestDecodeAccepts(t *testing.T) {
	buf := []byte{1, 2, 3, 4, 5, 6, 7, 8}
	tests := []struct {
		name   string
		data   []byte
		names  []string // in offset order
		md     map[string]string
		shapes [][]int
	}{
		{"no tensors", rawFile("{}", nil), nil, nil, nil},
		{"null metadata", rawFile(`{"__metadata__":null}`, nil), nil, nil, nil},
		{"empty metadata", rawFile(`{"__metadata__":{}}`, nil), nil, map[string]string{}, nil},
		{"whitespace around", rawFile(" \n\t{ \"__metadata__\" : { \"k\" : \"v\\u00e9\" } }\r\n  ", nil), nil,
			map[string]string{"k": "vé"}, nil},
		{"metadata last", rawFile(`{"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},"__metadata__":{"k":"v"}}`, buf[:2]),
			[]string{"a"}, map[string]string{"k": "v"}, [][]int{{2}}},
		{"header out of offset order", rawFile(`{"b":{"dtype":"U8","shape":[2,3],"data_offsets":[2,8]},`+
			`"a":{"data_offsets":[0,2],"shape":[1,2],"dtype":"I8"}}`, buf), []string{"a", "b"}, nil, [][]int{{1, 2}, {2, 3}}},
		{"empty tensors", rawFile(`{"e":{"dtype":"F64","shape":[0],"data_offsets":[0,0]},`+
			`"s":{"dtype":"F64","shape":[],"data_offsets":[0,8]},"z":{"dtype":"I32","shape":[3,0],"data_offsets":[8,8]}}`, buf),
			[]string{"e", "s", "z"}, nil, [][]int{{0}, {}, {3, 0}}},
		{"escaped name", rawFile(`{"a\"\u0062\ud83d\ude00":{"dtype":"BOOL","shape":[1],"data_offsets":[0,1]}}`, buf[:1]),
			[]string{"a\"b😀"}, nil, [][]int{{1}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := Decode(tt.data)
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			var names []string
			var shapes [][]int
			for _, tensor := range f.Tensors {
				names = append(names, tensor.Name)
				shapes = append(shapes, tensor.Shape)
			}
			if !slices.Equal(names, tt.names) {
				t.Errorf("tensors %q, want %q", names, tt.names)
			}
			if !slices.EqualFunc(shapes, tt.shapes, slices.Equal) {
				t.Errorf("shapes %v, want %v", shapes, tt.shapes)
			}
			if (f.Metadata == nil) != (tt.md == nil) || len(f.Metadata) != len(tt.md) {
				t.Errorf("metadata %#v, want %#v", f.Metadata, tt.md)
			}
			for k, v := range tt.md {
				if f.Metadata[k] != v {
					t.Errorf("metadata[%q] = %q, want %q", k, f.Metadata[k], v)
				}
			}
		})
	}
}

func TestDecodeSharesCappedData(t *testing.T) {
	data := rawFile(`{"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},"b":{"dtype":"U8","shape":[2],"data_offsets":[2,4]}}`,
		[]byte{1, 2, 3, 4})
	f, err := Decode(data)
	if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	a, _ := f.Tensor("a")
	_ = append(a.Data, 9) // must not overwrite b
	if b, _ := f.Tensor("b"); b.Data[0] != 3 {
		t.Fatalf("appending to a's data overwrote b: %v", b.Data)
	}
}
