package shm

import (
	"context"
	"testing"
	"time"

	"github.com/gorun-hpc/gorun/spmd/transport"
)

// pollUntil polls tr until n messages have reached rec's rank, within the
// hang guard.
func pollUntil(t *testing.T, c *cluster, rank, n int) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for len(c.rs[rank].Msgs()) < n {
		if time.Now().After(deadline) {
			t.Fatalf("rank %d: %d of %d messages after polling for %v", rank, len(c.rs[rank].Msgs()), n, waitLimit)
		}
		c.ts[rank].Poll()
	}
}

// TestLingerDelivers checks the lingering registration of a poller whose
// polls delivered something: while it lingers, senders skip the doorbell;
// when it ends with nobody polling, what arrived meanwhile is delivered all
// the same, and the receiver goroutine takes over again.
func TestLingerDelivers(t *testing.T) {
	c := newCluster(t, 2)
	ctx := context.Background()
	hdr := c.ts[1].seg.hdr
	send := func(i int) {
		t.Helper()
		if err := c.ts[0].Send(ctx, 1, transport.Header{Tag: int32(i), Len: 8}, make([]byte, 8)); err != nil {
			t.Fatal(err)
		}
	}
	seen := 0 // rounds whose check came while the linger had to last
	for round := range 20 {
		c.ts[1].BeginPoll()
		send(2 * round)
		pollUntil(t, c, 1, 2*round+1)
		start := time.Now()
		c.ts[1].EndPoll()
		got := hdr.pollers.Load()
		// The linger lasts at least lingerFor from EndPoll; a check that a
		// busy host delays longer proves nothing either way.
		if time.Since(start) < lingerFor {
			if got != 1 {
				t.Fatalf("round %d: %d pollers registered right after EndPoll of a session that delivered; want 1 (lingering)", round, got)
			}
			seen++
		}
		send(2*round + 1) // nobody polls: the end of the linger delivers it
		c.rs[1].WaitMsgs(t, 2*round+2)
		deadline := time.Now().Add(waitLimit)
		for hdr.pollers.Load() != 0 {
			if time.Now().After(deadline) {
				t.Fatalf("round %d: the linger never ended", round)
			}
			time.Sleep(lingerFor)
		}
	}
	if seen == 0 {
		t.Logf("no check of the linger came within %v of its EndPoll: the host was too busy to see it", lingerFor)
	}
	// Back to the receiver goroutine: a message now rings the doorbell.
	send(40)
	c.rs[1].WaitMsgs(t, 41)
	for i, m := range c.rs[1].Msgs() {
		if m.Header.Tag != int32(i) {
			t.Fatalf("message %d has tag %d; want %d (order)", i, m.Header.Tag, i)
		}
	}
}

// TestLingerTakenOver checks that a new poller takes a lingering
// registration over instead of adding one, and that a session that
// delivered nothing does not linger.
func TestLingerTakenOver(t *testing.T) {
	c := newCluster(t, 2)
	hdr := c.ts[1].seg.hdr
	c.ts[1].BeginPoll()
	if err := c.ts[0].Send(context.Background(), 1, transport.Header{Tag: 1}, nil); err != nil {
		t.Fatal(err)
	}
	pollUntil(t, c, 1, 1)
	c.ts[1].EndPoll()
	c.ts[1].BeginPoll() // takes the lingering registration over
	if got := hdr.pollers.Load(); got != 1 {
		t.Fatalf("%d pollers registered after taking a linger over; want 1", got)
	}
	c.ts[1].EndPoll() // delivered nothing: no linger
	if got := hdr.pollers.Load(); got != 0 {
		t.Fatalf("%d pollers registered after a session that delivered nothing; want 0", got)
	}
}
