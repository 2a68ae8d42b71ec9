// Package proctest runs programs as real processes, alone or as the ranks
// of a gorun job, for the tests and benchmarks of the examples and of the
// benchmark commands (bench/...).
package proctest
