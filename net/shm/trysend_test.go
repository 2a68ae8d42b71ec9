package shm

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/gorun-hpc/gorun/spmd/transport"
)

// TrySend writes small messages at once, declines what does not fit a
// quarter of the ring or the room it has, and keeps its order with Send's.
func TestTrySend(t *testing.T) {
	const ring = 4 << 10
	c := newCluster(t, 2, WithRingSize(ring))
	ctx := context.Background()
	big := make([]byte, ring) // more than a quarter of the ring: not for TrySend
	if sent, err := c.ts[0].TrySend(1, transport.Header{Tag: 9, Len: len(big)}, big); sent || err != nil {
		t.Fatalf("TrySend of a %d-byte message into a %d-byte ring: sent %v, %v", len(big), ring, sent, err)
	}
	const n = 400 // far more than the ring holds: some TrySends must decline
	declined := 0
	for i := 0; i < n; i++ {
		payload := []byte(fmt.Sprintf("message %03d", i))
		h := transport.Header{Tag: 1, Len: len(payload)}
		if i%3 == 0 {
			if err := c.ts[0].Send(ctx, 1, h, payload); err != nil {
				t.Fatal(err)
			}
			continue
		}
		sent, err := c.ts[0].TrySend(1, h, payload)
		if err != nil {
			t.Fatal(err)
		}
		if !sent {
			declined++
			if err := c.ts[0].Send(ctx, 1, h, payload); err != nil {
				t.Fatal(err)
			}
		}
	}
	got := c.rs[1].WaitMsgs(t, n)
	for i, m := range got {
		if want := []byte(fmt.Sprintf("message %03d", i)); !bytes.Equal(m.Data, want) {
			t.Fatalf("message %d is %q, want %q", i, m.Data, want)
		}
	}
	t.Logf("%d of %d TrySends declined for want of room", declined, n-n/3)
	if sent, _ := c.ts[0].TrySend(0, transport.Header{}, nil); sent {
		t.Fatal("TrySend to itself sent")
	}
}
