package nn

// installFast is replaced when strategies/nn/gemm lands.
func installFast() {}
