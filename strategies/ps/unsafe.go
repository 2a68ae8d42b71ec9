package ps

import "unsafe"

// unsafeF32 views b as float32s; b's address is 4-aligned (it comes from
// make of a float32 slice, see newMsg).
func unsafeF32(b []byte) []float32 {
	return unsafe.Slice((*float32)(unsafe.Pointer(&b[0])), len(b)/4)
}

// newMsg returns a message buffer of header bytes then n float32s, with
// the float32s 4-aligned.
func newMsg(n int) []byte {
	f := make([]float32, header/4+n)
	return unsafe.Slice((*byte)(unsafe.Pointer(&f[0])), len(f)*4)
}
