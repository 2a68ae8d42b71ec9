//go:build race

package gemm

// raceEnabled says the race detector is on: it makes sync.Pool drop a
// quarter of what is put in it, so allocation counts mean nothing then.
const raceEnabled = true
