package plan

import (
	"errors"
	"fmt"
)

// ErrJob is wrapped by every error that rejects a Job: a field that is
// not positive, a sequence longer than the model's context, a model
// configuration that nn rejects.
var ErrJob = errors.New("invalid job")

// ErrMachine is wrapped by every error that rejects a Machine: a rate
// that is not positive, a latency or inverse bandwidth that is negative
// or not a number.
var ErrMachine = errors.New("invalid machine")

// ErrLayout is wrapped by the errors that reject a Layout for a job: a
// degree that does not divide what it splits, a schedule the engine does
// not run with the layout.
var ErrLayout = errors.New("invalid layout")

// ErrNoLayout is returned by Rank when no layout is valid for the job,
// and by Write when it is given no estimates.
var ErrNoLayout = errors.New("no valid layout")

// kindError is an error with a message written for people and a sentinel
// for errors.Is, so that the message need not repeat the sentinel's text.
type kindError struct {
	msg   string
	kind  error
	cause error // what it wraps besides kind, or nil
}

func (e *kindError) Error() string { return e.msg }

// Unwrap returns the sentinel and the cause, if any.
func (e *kindError) Unwrap() []error {
	if e.cause == nil {
		return []error{e.kind}
	}
	return []error{e.kind, e.cause}
}

// errorf returns an error that reads as the formatted message and wraps
// kind.
func errorf(kind error, format string, a ...any) error {
	return &kindError{msg: fmt.Sprintf(format, a...), kind: kind}
}
