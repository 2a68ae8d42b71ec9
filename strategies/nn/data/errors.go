package data

import (
	"errors"
	"fmt"
)

// ErrArgument is wrapped by every error that rejects an argument: a batch
// that does not split over the ranks, a rank out of range, a buffer too short
// for a batch, an index outside a data set.
var ErrArgument = errors.New("invalid argument")

// ErrFormat is wrapped by the errors of ReadTokens for a file that is not a
// flat array of little-endian uint16 token ids, or that holds an id outside
// the vocabulary.
var ErrFormat = errors.New("malformed token file")

// ErrEmpty is wrapped by the errors for a file, a set of files or a byte
// slice that holds no data.
var ErrEmpty = errors.New("no data")

// ErrNoGoroot is wrapped by the error of GoSource when no Go source tree
// can be found.
var ErrNoGoroot = errors.New("Go source tree not found")

// kindError is an error with a message written for people and a sentinel
// for errors.Is, so that the message need not repeat the sentinel's text.
type kindError struct {
	msg  string
	kind error
}

func (e *kindError) Error() string { return e.msg }

// Unwrap returns the sentinel.
func (e *kindError) Unwrap() error { return e.kind }

// errorf returns an error that reads as the formatted message and wraps kind.
func errorf(kind error, format string, a ...any) error {
	return &kindError{msg: fmt.Sprintf(format, a...), kind: kind}
}
