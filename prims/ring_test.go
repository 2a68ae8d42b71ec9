package prims

import (
	"testing"

	"github.com/gorun-hpc/gorun/topo"
)

// topo models the ring's and the chain's segments with its own constant,
// since it cannot import prims: the two must agree.
func TestSegmentModelled(t *testing.T) {
	if SegmentBytes != topo.Segment {
		t.Fatalf("prims.SegmentBytes is %d, topo.Segment %d", SegmentBytes, topo.Segment)
	}
}
