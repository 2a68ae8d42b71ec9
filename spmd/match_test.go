package spmd

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/gorun-hpc/gorun/spmd/transport"
)

// TestRecentQueuesFollowTheMap posts receives and delivers messages on
// more keys than the engine keeps queues for, in a random order, so that
// queues leave the map and are reused for other keys, and checks that
// every receive gets the message of its own key: a queue cached under a
// key it no longer holds would hand one key's message to another's
// receive.
func TestRecentQueuesFollowTheMap(t *testing.T) {
	g := &gate{entered: make(chan byte, 1), release: make(chan error, 1)}
	e := newEngine(0, 2, g)
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(3, 4))
	const keys = 3 * keptQueues
	type pending struct {
		r   *Request
		tag int32
	}
	var reqs []pending
	arrive := func(comm uint32, tag int32) {
		h := transport.Header{Comm: comm, Tag: tag, Len: 4}
		buf := e.Buffer(1, h)
		buf[0], buf[1], buf[2], buf[3] = byte(comm), byte(tag), byte(tag>>8), 0
		e.Deliver(1, h, buf)
	}
	for step := range 200000 {
		tag := int32(rng.IntN(keys))
		comm := uint32(rng.IntN(2))
		if rng.IntN(2) == 0 {
			arrive(comm, tag)
		} else {
			r := e.irecvWatch(comm, 1, tag, make([]byte, 4), false)
			reqs = append(reqs, pending{r, tag})
		}
		if len(reqs) > 64 || step%1000 == 999 {
			for _, p := range reqs {
				if !p.r.finished() {
					arrive(p.r.key.comm, p.tag)
				}
				if !p.r.finished() {
					t.Fatalf("step %d: the receive of comm %d tag %d did not get the message that arrived for it", step, p.r.key.comm, p.tag)
				}
				if _, err := p.r.Wait(ctx); err != nil {
					t.Fatal(err)
				}
				b := p.r.buf
				if b[0] != byte(p.r.key.comm) || int32(b[1])|int32(b[2])<<8 != p.tag {
					t.Fatalf("step %d: the receive of comm %d tag %d got the message of comm %d tag %d",
						step, p.r.key.comm, p.tag, b[0], int32(b[1])|int32(b[2])<<8)
				}
			}
			reqs = reqs[:0]
		}
	}
}

// TestArrive: a whole message goes into its posted receive (a followed by
// b), fails one too short for it, waits as an early message for a later
// receive, and is dropped for a communicator freed here.
func TestArrive(t *testing.T) {
	g := &gate{entered: make(chan byte, 1), release: make(chan error, 1)}
	e := newEngine(0, 2, g)
	ctx := context.Background()
	h := transport.Header{Comm: 2, Tag: 5, Len: 4}
	check := func(what string, r *Request, wantN int, want string, wantErr error) {
		t.Helper()
		if !r.finished() {
			t.Fatalf("%s: the receive did not complete", what)
		}
		n, err := r.Wait(ctx)
		if n != wantN || string(r.buf[:n]) != want || !errors.Is(err, wantErr) {
			t.Errorf("%s: %d bytes %q, %v; want %d %q, %v", what, n, r.buf[:n], err, wantN, want, wantErr)
		}
	}
	r := e.irecvWatch(2, 1, 5, make([]byte, 4), false)
	e.Arrive(1, h, []byte("ab"), []byte("cd"))
	check("posted", r, 4, "abcd", nil)

	r = e.irecvWatch(2, 1, 5, make([]byte, 2), false)
	e.Arrive(1, h, []byte("abc"), []byte("d"))
	check("too short", r, 2, "ab", ErrTruncated)

	e.Arrive(1, h, []byte("wxyz"), nil)
	r = e.irecvWatch(2, 1, 5, make([]byte, 4), false)
	check("early", r, 4, "wxyz", nil)

	e.free(2, errors.New("freed"))
	e.Arrive(1, h, []byte("lost"), nil)
	e.mu.Lock()
	n := len(e.queues)
	q := e.find(matchKey{2, 1, 5})
	e.mu.Unlock()
	if q != nil && q.unexp.len() > 0 {
		t.Errorf("a message for a freed communicator was kept (%d queues)", n)
	}
}
