//go:build !amd64

package gemm

// vectorArchs is empty off amd64: products run on the Go kernels.
var vectorArchs []*arch
