//go:build !purego

package compress

import "golang.org/x/sys/cpu"

// kernelBlock is the number of elements the assembly kernels of
// fp16_amd64.s take at a time; the slices they are given have a multiple
// of it, and the Go loops do the rest.
const kernelBlock = 32

// haveF16C says the CPU runs the binary16 kernels (F16C's VCVTPS2PH and
// VCVTPH2PS on 256-bit AVX registers); haveAVX2 the bfloat16 ones.
var (
	haveF16C = cpu.X86.HasAVX && cpu.X86.HasF16C
	haveAVX2 = cpu.X86.HasAVX2
)

// The kernels of fp16_amd64.s: each does what the Go loop of its name
// does (encF16x is encodeF16, ...) to slices whose length is a multiple
// of kernelBlock, bit for bit the same.

//go:noescape
func encF16x(dst []F16, src []float32)

//go:noescape
func decF16x(dst []float32, src []F16)

//go:noescape
func addF16x(dst, src []F16)

//go:noescape
func accF16x(dst []F16, src []float32)

//go:noescape
func encBF16x(dst []BF16, src []float32)

//go:noescape
func decBF16x(dst []float32, src []BF16)

//go:noescape
func addBF16x(dst, src []BF16)

//go:noescape
func accBF16x(dst []BF16, src []float32)
