//go:build !amd64

package kernel

// Without amd64's AVX2 kernels (add_amd64.s) the sums run in Go.
const haveAVX2 = false

func addF32x(dst, src *byte, n int) { panic("kernel: no vector kernel") }
func addF64x(dst, src *byte, n int) { panic("kernel: no vector kernel") }
func addI32x(dst, src *byte, n int) { panic("kernel: no vector kernel") }
func addI64x(dst, src *byte, n int) { panic("kernel: no vector kernel") }
func addU8x(dst, src *byte, n int)  { panic("kernel: no vector kernel") }
func maxF32x(dst, src *byte, n int) { panic("kernel: no vector kernel") }
func minF32x(dst, src *byte, n int) { panic("kernel: no vector kernel") }
func maxF64x(dst, src *byte, n int) { panic("kernel: no vector kernel") }
func minF64x(dst, src *byte, n int) { panic("kernel: no vector kernel") }
func mulF32x(dst, src *byte, n int) { panic("kernel: no vector kernel") }
func mulF64x(dst, src *byte, n int) { panic("kernel: no vector kernel") }
func mulI32x(dst, src *byte, n int) { panic("kernel: no vector kernel") }
func maxI32x(dst, src *byte, n int) { panic("kernel: no vector kernel") }
func minI32x(dst, src *byte, n int) { panic("kernel: no vector kernel") }

func streamx(dst, src *byte, n int) { panic("kernel: no vector kernel") }
