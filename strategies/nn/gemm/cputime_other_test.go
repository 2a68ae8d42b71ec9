//go:build !unix

package gemm

// cpuSeconds is zero where the process's CPU time is not at hand: the
// benchmarks then report wall-clock rates only.
func cpuSeconds() float64 { return 0 }
