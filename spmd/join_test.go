package spmd

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/gorun-hpc/gorun/net/gossip"
	"github.com/gorun-hpc/gorun/net/rendezvous"
)

// TestRegisterStoppedInGrace: a rank whose Init deadline has passed waits
// rendezvousGrace for the launcher's verdict; the launcher's stop (a
// cancel of the context Init was given) ends that wait. register watched
// its Init context, whose deadline had already fired, and missed the
// cancel: the rank waited out the grace after the job was stopped.
func TestRegisterStoppedInGrace(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	secret := make([]byte, 32)
	srv := rendezvous.Listen(ln, "job1", secret, nil)
	defer srv.Close()
	outer, stop := context.WithCancel(context.Background())
	defer stop()
	ictx, cancel := context.WithTimeout(outer, 50*time.Millisecond)
	defer cancel()
	context.AfterFunc(ictx, func() { time.AfterFunc(100*time.Millisecond, stop) }) // in the grace
	env := Env{Rank: 0, Size: 2, JobID: "job1", Rendezvous: srv.Addr()}
	_, _, err = register(ictx, outer, env, secret, gossip.Member{Rank: 0, HostID: "h", Addr: "127.0.0.1:1"}, gossip.Config{})
	if !errors.Is(err, context.Canceled) || errors.Is(err, rendezvous.ErrTimeout) {
		t.Fatalf("register: %v, want the stop (context.Canceled), not the end of the grace", err)
	}
}
