package prims

import (
	"context"
	"fmt"
	"os"
	"reflect"
	"strconv"
	"strings"

	"github.com/gorun-hpc/gorun/spmd"
	"github.com/gorun-hpc/gorun/spmd/contract"
	"github.com/gorun-hpc/gorun/topo"
)

// checking is GORUN_CHECK_COLLECTIVES=1: before every collective call
// that moves data, the ranks compare what they called (collective,
// size, element type, root, op, forced algorithm) and fail together
// with ErrMismatch, naming
// the ranks and calls that differ, as PyTorch's
// TORCH_DISTRIBUTED_DEBUG=DETAIL checks the collectives' fingerprints.
// Without it, mismatches go unseen where the algorithm cannot tell (see
// the package doc). It costs two message hops per call.
// It takes what strconv.ParseBool takes (1, true, 0, false, ...); spmd.Init
// refuses any other value, so that a check asked for is never silently off.
var checking, _ = strconv.ParseBool(os.Getenv(CheckEnv))

// CheckEnv is the variable that turns the calls' check on (=1).
const CheckEnv = contract.EnvCheckColls

// checkTag carries the check's fingerprints and verdicts on the
// collective context.
const checkTag = noticeTag + 4

// signature is what a call's ranks must agree on beyond its collective
// and size: its root (-1: none), op's name ("": none) and element type,
// held as a nil *T, so that building one costs a call nothing (a
// function value of typeName[T] was a closure allocated per call).
type signature struct {
	root int
	op   string
	elem any
}

// sig is the signature of a call over elements of T.
func sig[T spmd.Number](root int, op string) signature {
	return signature{root: root, op: op, elem: (*T)(nil)}
}

// describe says what a call is, for the check: the same text on every
// rank for matching calls.
func (s signature) describe(coll topo.Collective, bytes int, algo topo.Algo) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s of %d bytes", coll, bytes)
	if s.elem != nil {
		fmt.Fprintf(&b, " of %s", reflect.TypeOf(s.elem).Elem())
	}
	if s.root >= 0 {
		fmt.Fprintf(&b, ", root %d", s.root)
	}
	if s.op != "" {
		fmt.Fprintf(&b, ", op %s", s.op)
	}
	if algo != "" {
		fmt.Fprintf(&b, ", algorithm %s", algo)
	}
	return b.String()
}

// checkMax bounds a fingerprint and a verdict.
const checkMax = 1024

// checkCall compares this rank's call, what, with every other rank's:
// rank 0 gathers them and sends every rank the verdict, empty when they
// all match. st counts the checked calls, to name the one that failed.
func checkCall(ctx context.Context, cc *spmd.Comm, st *state, what string) error {
	st.checked++
	n := st.checked
	if len(what) > checkMax {
		what = what[:checkMax]
	}
	verdict := make([]byte, checkMax)
	if cc.Rank() != 0 {
		if err := cc.Send(ctx, 0, checkTag, []byte(what)); err != nil {
			return err
		}
		m, err := cc.Recv(ctx, 0, checkTag, verdict)
		if err != nil {
			return err
		}
		if m > 0 {
			return fmt.Errorf("%w: %s", ErrMismatch, verdict[:m])
		}
		return nil
	}
	var diffs []string
	buf := make([]byte, checkMax)
	for r := 1; r < cc.Size(); r++ {
		m, err := cc.Recv(ctx, r, checkTag, buf)
		if err != nil {
			return err
		}
		if got := string(buf[:m]); got != what && len(diffs) < 4 {
			diffs = append(diffs, fmt.Sprintf("rank %d called %s", r, got))
		}
	}
	msg := ""
	if len(diffs) > 0 {
		msg = fmt.Sprintf("call %d on this communicator: %s, where rank 0 called %s (%s)", n, strings.Join(diffs, "; "), what, CheckEnv)
		if len(msg) > checkMax {
			msg = msg[:checkMax-3] + "..."
		}
	}
	for r := 1; r < cc.Size(); r++ {
		if err := cc.Send(ctx, r, checkTag, []byte(msg)); err != nil {
			return err
		}
	}
	if msg != "" {
		return fmt.Errorf("%w: %s", ErrMismatch, msg)
	}
	return nil
}
