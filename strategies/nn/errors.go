package nn

import (
	"errors"
	"fmt"
)

// ErrConfig is wrapped by every error that rejects a model's configuration:
// a dimension that is not positive, heads that do not divide the width, a
// dropout probability outside [0, 1).
var ErrConfig = errors.New("invalid model configuration")

// ErrShape is wrapped by the errors for a batch or an input whose sizes do
// not fit the model: too few tokens or targets for N×T, a sequence longer
// than the model's context.
var ErrShape = errors.New("input shape does not fit the model")

// ErrIndex is wrapped by the errors for a token id outside the vocabulary
// or a class target outside the logits.
var ErrIndex = errors.New("index out of range")

// kindError is an error with a message written for people and a sentinel
// for errors.Is, so that the message need not repeat the sentinel's text.
type kindError struct {
	msg  string
	kind error
}

func (e *kindError) Error() string { return e.msg }

// Unwrap returns the sentinel.
func (e *kindError) Unwrap() error { return e.kind }

// errorf returns an error that reads as the formatted message and wraps
// kind.
func errorf(kind error, format string, a ...any) error {
	return &kindError{msg: fmt.Sprintf(format, a...), kind: kind}
}

// Abort carries an error out of code that cannot return one: a unit hook
// or a layer's Backward whose collective failed (a sharding driver's
// gather, a tensor-parallel all-reduce) panics with an Abort, and the
// driver that runs the pass recovers it (RecoverAbort) and returns Err.
// Any other panic is a bug and is not recovered.
type Abort struct{ Err error }

func (a Abort) Error() string { return a.Err.Error() }

// Unwrap returns Err.
func (a Abort) Unwrap() error { return a.Err }

// RecoverAbort, deferred, turns a panic with an Abort into *err (joined
// with what *err held) and lets any other panic go on.
func RecoverAbort(err *error) {
	if v := recover(); v != nil {
		a, ok := v.(Abort)
		if !ok {
			panic(v)
		}
		*err = errors.Join(*err, a.Err)
	}
}
