// Package safetensors reads and writes Hugging Face's safetensors format, so
// that a checkpoint written here loads in Python's safetensors (and the tools
// built on it) and a checkpoint written there loads here.
//
// # Format
//
// A file is
//
//	8 bytes      N, the header length, little-endian unsigned
//	N bytes      the header: a UTF-8 JSON object, padded with spaces
//	rest         the data buffer
//
// The header maps each tensor name to its dtype, shape and data_offsets
// [begin, end], a byte range relative to the start of the data buffer, and
// may hold a "__metadata__" object of string keys and string values:
//
//	{"__metadata__":{"format":"pt"},"fc1.weight":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]}}
//
// Tensor data is little-endian and row-major (C order). The tensors' byte
// ranges cover the buffer exactly, with neither gaps nor overlaps.
//
// # Writing
//
// Encode and WriteFile write the header as the reference writer does:
// compact JSON, "__metadata__" first with its keys sorted, then one entry per
// tensor in data order, padded with spaces to a multiple of 8 bytes so that
// the buffer starts aligned. The tensors are laid out in the order given;
// Sort orders them as the reference writer does (largest dtype first, then by
// name), which makes the file byte-identical to the one Python's
// safetensors.serialize writes for the same tensors and metadata.
//
//	err := safetensors.WriteFile("ckpt/model.safetensors", []safetensors.Tensor{
//		safetensors.F32("fc1.weight", []int{2, 3}, w),
//	}, map[string]string{"format": "pt"})
//
// WriteFile is atomic: a reader sees either the old file or the complete new
// one, never a partial write. The temporary file that a crash mid-write
// leaves is removed by the next WriteFile of the same path.
//
// # Reading
//
// Decode validates untrusted bytes as strictly as the reference reader and a
// little more (duplicate names and unknown fields are rejected too); every
// error for malformed input wraps ErrFormat and says what was wrong and in
// which tensor. ReadFile does the same for a file and names it in every
// error.
//
//	f, err := safetensors.ReadFile("ckpt/model.safetensors")
//	t, ok := f.Tensor("fc1.weight")
//	w, err := t.Float32s()
//
// The dtypes are BOOL, U8, I8, I16, U16, I32, U32, I64, U64, F16, BF16, F32
// and F64. Files holding other dtypes of the reference (the 8-bit, 6-bit and
// 4-bit floats, C64) are rejected as unsupported.
package safetensors
