package prims

import (
	"context"
	"errors"
	"fmt"

	"github.com/gorun-hpc/gorun/spmd"
)

// Agree makes a failure on one rank of c a failure on all; every rank
// calls it, with its own err (nil if it did not fail). The rank that had
// err returns it; the others return an error naming the lowest rank that
// failed at what ("WHAT failed on rank R (its error is in its output)",
// R its world rank), or nil if none did. A failure of the agreement
// itself is joined to err. Checkpoint writers and loaders use it so that
// no rank goes on past a step another could not take.
func Agree(ctx context.Context, c *spmd.Comm, err error, what string) error {
	failed := []int32{int32(c.Size())}
	if err != nil {
		failed[0] = int32(c.Rank())
	}
	if e := AllReduce(ctx, c, failed, Min[int32]()); e != nil {
		return errors.Join(err, e)
	}
	if err == nil && failed[0] < int32(c.Size()) {
		err = fmt.Errorf("%s failed on rank %d (its error is in its output)", what, c.WorldRank(int(failed[0])))
	}
	return err
}
