//go:build !amd64 || purego

package compress

// Without amd64's kernels (fp16_amd64.s), or with the purego build tag
// (go test -tags purego tests the fallback on amd64), the conversions run
// in Go.
const (
	kernelBlock = 32
	haveF16C    = false
	haveAVX2    = false
)

// The kernels' stand-ins, never called: they do what the kernels do.

func encF16x(dst []F16, src []float32)   { encodeF16(dst, src) }
func decF16x(dst []float32, src []F16)   { decodeF16(dst, src) }
func addF16x(dst, src []F16)             { addF16(dst, src) }
func accF16x(dst []F16, src []float32)   { accumulateF16(dst, src) }
func encBF16x(dst []BF16, src []float32) { encodeBF16(dst, src) }
func decBF16x(dst []float32, src []BF16) { decodeBF16(dst, src) }
func addBF16x(dst, src []BF16)           { addBF16(dst, src) }
func accBF16x(dst []BF16, src []float32) { accumulateBF16(dst, src) }
