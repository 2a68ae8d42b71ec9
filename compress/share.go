package compress

import (
	"context"
	"encoding"
	"fmt"
	"strings"

	"github.com/gorun-hpc/gorun/prims"
	"github.com/gorun-hpc/gorun/spmd"
)

// Stateful reports whether codec keeps state between calls that a
// checkpoint should carry (it is an encoding.BinaryMarshaler and
// BinaryUnmarshaler); nil and fp16 and bf16 do not.
func Stateful(codec Codec) bool {
	_, m := codec.(encoding.BinaryMarshaler)
	_, u := codec.(encoding.BinaryUnmarshaler)
	return m && u
}

// StateName is the name of the codec whose state codec saves: its Name
// without a lossless stage ("topk:0.01" for "topk:0.01+s2"), which adds
// no state. Two codecs restore each other's state when their StateNames
// are equal.
func StateName(codec Codec) string {
	if codec == nil {
		return "none"
	}
	name, _, _ := strings.Cut(codec.Name(), "+")
	return name
}

// GatherStates returns at root every rank's codec state (MarshalBinary),
// indexed by rank, and nil on the other ranks. Every rank of c calls it
// with its own codec, which must be idle (no AllReduce in flight). A
// codec that keeps no state (Stateful false) gives nil on every rank
// without communicating; every rank must then pass such a codec.
func GatherStates(ctx context.Context, c *spmd.Comm, codec Codec, root int) ([][]byte, error) {
	if !Stateful(codec) {
		return nil, nil
	}
	mine, err := codec.(encoding.BinaryMarshaler).MarshalBinary()
	if err != nil {
		return nil, fmt.Errorf("%s: saving the codec state: %w", codec.Name(), err)
	}
	lens := make([]int64, c.Size())
	if err := prims.AllGather(ctx, c, []int64{int64(len(mine))}, lens); err != nil {
		return nil, fmt.Errorf("gathering the codec states' sizes: %w", err)
	}
	width := 0
	for _, n := range lens {
		width = max(width, int(n))
	}
	send := make([]byte, width)
	copy(send, mine)
	var all []byte
	if c.Rank() == root {
		all = make([]byte, width*c.Size())
	}
	if err := prims.Gather(ctx, c, send, all, root); err != nil {
		return nil, fmt.Errorf("gathering the codec states: %w", err)
	}
	if c.Rank() != root {
		return nil, nil
	}
	out := make([][]byte, c.Size())
	for r := range out {
		out[r] = all[r*width : r*width+int(lens[r])]
	}
	return out, nil
}

// ScatterStates restores into each rank's codec the state that root
// gives it, states[r] for rank r (states is root's; the other ranks pass
// nil), with UnmarshalBinary. root must give one state per rank of c;
// every rank of c calls it, and every rank gets an error if one rank's
// restore failed: that rank's, or one naming it. A codec that keeps no
// state is an error on every rank.
func ScatterStates(ctx context.Context, c *spmd.Comm, codec Codec, states [][]byte, root int) error {
	if !Stateful(codec) {
		return fmt.Errorf("restoring codec states into %s: it keeps no state", StateName(codec))
	}
	lens := make([]int64, c.Size()+1) // the ranks' sizes, and a flag: root's states fit c
	if c.Rank() == root && len(states) == c.Size() {
		lens[c.Size()] = 1
		for r, s := range states {
			lens[r] = int64(len(s))
		}
	}
	if err := prims.Broadcast(ctx, c, lens, root); err != nil {
		return fmt.Errorf("sending the codec states: %w", err)
	}
	if lens[c.Size()] != 1 {
		return fmt.Errorf("restoring codec states: rank %d has %d states for %d ranks", root, len(states), c.Size())
	}
	width := 0
	for _, n := range lens[:c.Size()] {
		width = max(width, int(n))
	}
	var all []byte
	if c.Rank() == root {
		all = make([]byte, width*c.Size())
		for r, s := range states {
			copy(all[r*width:], s)
		}
	}
	mine := make([]byte, width)
	if err := prims.Scatter(ctx, c, all, mine, root); err != nil {
		return fmt.Errorf("sending the codec states: %w", err)
	}
	err := codec.(encoding.BinaryUnmarshaler).UnmarshalBinary(mine[:lens[c.Rank()]])
	if err != nil {
		err = fmt.Errorf("rank %d: restoring its codec state: %w", c.Rank(), err)
	}
	return prims.Agree(ctx, c, err, "restoring the codec state")
}
