package kernel

import "golang.org/x/sys/cpu"

// haveAVX2 says the CPU runs the kernels of add_amd64.s.
var haveAVX2 = cpu.X86.HasAVX2

//go:noescape
func addF32x(dst, src *byte, n int)

//go:noescape
func addF64x(dst, src *byte, n int)

//go:noescape
func addI32x(dst, src *byte, n int)

//go:noescape
func addI64x(dst, src *byte, n int)

//go:noescape
func addU8x(dst, src *byte, n int)

//go:noescape
func maxF32x(dst, src *byte, n int)

//go:noescape
func minF32x(dst, src *byte, n int)

//go:noescape
func maxF64x(dst, src *byte, n int)

//go:noescape
func minF64x(dst, src *byte, n int)

//go:noescape
func mulF32x(dst, src *byte, n int)

//go:noescape
func mulF64x(dst, src *byte, n int)

//go:noescape
func mulI32x(dst, src *byte, n int)

//go:noescape
func maxI32x(dst, src *byte, n int)

//go:noescape
func minI32x(dst, src *byte, n int)

//go:noescape
func streamx(dst, src *byte, n int)
