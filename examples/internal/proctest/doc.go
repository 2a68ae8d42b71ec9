// Package proctest runs the examples as real processes, alone or as the
// ranks of a gorun job, for their tests and benchmarks.
package proctest
