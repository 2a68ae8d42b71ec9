package safetensors

import (
	"bytes"
	"encoding/hex"
	"strings"
	"testing"
)

// TestEncodeGolden checks a small file byte for byte against one worked out
// by hand from the format's rules: the length prefix, compact JSON with the
// metadata first and the tensors in the given order, padding with spaces to
// a multiple of 8, and the data at the offsets the header gives.
func TestEncodeGolden(t *testing.T) {
	tensors := []Tensor{
		F32("b", []int{2}, []float32{1, -2}),
		{Name: "a", DType: Uint8, Shape: []int{3}, Data: []byte{1, 2, 3}},
	}
	// 138 bytes of JSON, padded with 6 spaces to 144 = 0x90.
	const header = `{"__metadata__":{"format":"pt"},` +
		`"b":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},` +
		`"a":{"dtype":"U8","shape":[3],"data_offsets":[8,11]}}` + "      "
	want := append([]byte{0x90, 0, 0, 0, 0, 0, 0, 0}, header...)
	want = append(want,
		0x00, 0x00, 0x80, 0x3f, // 1.0
		0x00, 0x00, 0x00, 0xc0, // -2.0
		0x01, 0x02, 0x03)
	got := encode(t, tensors, map[string]string{"format": "pt"})
	if !bytes.Equal(got, want) {
		t.Fatalf("Encode wrote\n%s\nwant\n%s", hex.Dump(got), hex.Dump(want))
	}
}

func TestEncodeHeaderShapes(t *testing.T) {
	tests := []struct {
		name    string
		tensors []Tensor
		md      map[string]string
		want    string // the header without its padding
	}{
		{"no tensors", nil, nil, `{}`},
		{"empty metadata is left out", nil, map[string]string{}, `{}`},
		{"metadata only", nil, map[string]string{"z": "1", "a": "2"}, `{"__metadata__":{"a":"2","z":"1"}}`},
		{"scalar", []Tensor{{Name: "s", DType: Float64, Data: make([]byte, 8)}}, nil,
			`{"s":{"dtype":"F64","shape":[],"data_offsets":[0,8]}}`},
		{"empty tensor", []Tensor{{Name: "e", DType: Int16, Shape: []int{0, 5}}}, nil,
			`{"e":{"dtype":"I16","shape":[0,5],"data_offsets":[0,0]}}`},
		{"escapes as serde_json", []Tensor{{Name: "q\"\\\n\t\x01\x7fé<>&\u2028", DType: Bool, Data: []byte{1}}}, nil,
			`{"q\"\\\n\t\u0001` + "\x7fé<>&\u2028" + `":{"dtype":"BOOL","shape":[],"data_offsets":[0,1]}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hdr, err := encodeHeader(tt.tensors, tt.md)
			if err != nil {
				t.Fatalf("encodeHeader: %v", err)
			}
			if len(hdr)%8 != 0 {
				t.Errorf("header of %d bytes is not padded to a multiple of 8", len(hdr))
			}
			if got := strings.TrimRight(string(hdr), " "); got != tt.want {
				t.Errorf("header\n%s\nwant\n%s", got, tt.want)
			}
			if pad := len(hdr) - len(tt.want); pad < 0 || pad > 7 {
				t.Errorf("%d bytes of padding", pad)
			}
			f, err := Decode(encode(t, tt.tensors, tt.md))
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if diff := sameTensors(f.Tensors, tt.tensors); diff != "" {
				t.Fatal(diff)
			}
		})
	}
}

func TestDTypes(t *testing.T) {
	want := []struct {
		code string
		size int
	}{
		{"BOOL", 1}, {"U8", 1}, {"I8", 1}, {"I16", 2}, {"U16", 2}, {"F16", 2}, {"BF16", 2},
		{"I32", 4}, {"U32", 4}, {"F32", 4}, {"F64", 8}, {"I64", 8}, {"U64", 8},
	}
	got := DTypes()
	if len(got) != len(want) {
		t.Fatalf("DTypes() has %d dtypes, want %d", len(got), len(want))
	}
	for i, d := range got {
		if d.String() != want[i].code || d.Size() != want[i].size {
			t.Errorf("dtype %d is %v of %d bytes, want %s of %d", i, d, d.Size(), want[i].code, want[i].size)
		}
		if p, ok := parseDType(want[i].code); !ok || p != d {
			t.Errorf("parseDType(%q) = %v, %v", want[i].code, p, ok)
		}
	}
	for _, bad := range []DType{0, DType(len(want) + 1), 255} {
		if bad.Valid() || bad.Size() != 0 || !strings.HasPrefix(bad.String(), "DType(") {
			t.Errorf("invalid %d: Valid %v, Size %d, String %q", uint8(bad), bad.Valid(), bad.Size(), bad)
		}
	}
	for _, code := range []string{"f32", "F8_E4M3", "C64", "", "FLOAT"} {
		if _, ok := parseDType(code); ok {
			t.Errorf("parseDType(%q) accepted", code)
		}
	}
}
