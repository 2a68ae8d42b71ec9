package ps

import "unsafe"

// f32s views b, whose length is a multiple of 4, as float32s; b's
// address is 4-aligned (it comes from make of a float32 slice, see newMsg).
func f32s(b []byte) []float32 {
	if len(b) == 0 {
		return nil
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(&b[0])), len(b)/4)
}

// newMsg returns a message buffer of header bytes then n float32s, with
// the float32s 4-aligned.
func newMsg(n int) []byte {
	f := make([]float32, header/4+n)
	return unsafe.Slice((*byte)(unsafe.Pointer(&f[0])), len(f)*4)
}
