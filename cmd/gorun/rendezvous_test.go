package main

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestRendezvous512: 512 ranks of a program that only registers, on
// this machine's cores, all meet at the launcher's rendezvous and get the
// whole table; it takes seconds (gossip never converged at 256).
func TestRendezvous512(t *testing.T) {
	if testing.Short() {
		t.Skip("512 processes: not in -short")
	}
	const np = 512
	t0 := time.Now()
	r := gorun(t, "", "-np", fmt.Sprint(np), "--oversubscribe", "./testdata/register")
	if r.code != 0 || !strings.Contains(r.stdout, fmt.Sprintf("table of %d ranks, %d pids", np, np)) {
		t.Fatalf("gorun -np %d of a registering program:\n%s", np, r)
	}
	t.Logf("np %d: launch to exit %v", np, time.Since(t0).Round(time.Millisecond))
}
