package shm

import (
	"bytes"
	"context"
	"errors"
	"log"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorun-hpc/gorun/spmd/transport"
	"github.com/gorun-hpc/gorun/spmd/transport/transporttest"
)

// sendAsync sends n bytes from tr to peer in a goroutine.
func sendAsync(ctx context.Context, tr *Transport, peer, n int) chan error {
	done := make(chan error, 1)
	go func() { done <- tr.Send(ctx, peer, transport.Header{Tag: 9, Len: n}, make([]byte, n)) }()
	return done
}

func TestPeerDiesInProcess(t *testing.T) {
	c := build(t, 2, WithRingSize(1<<16))
	c.start(t, 0)
	c.start(t, 1)
	send(t, c.ts[1], 0, 1, []byte("last words"))
	c.rs[0].WaitMsgs(t, 1)
	c.ts[1].abandon() // its receiver stops: rank 0's big send fills the ring
	sent := sendAsync(context.Background(), c.ts[0], 1, 4<<20)
	c.ts[0].fakeDead(t, 1)
	checkLost(t, <-sent, 1, errPeerDied)
	checkLost(t, c.rs[0].WaitLost(t, 1), 1, errPeerDied)
}

func TestDeadPeerMessagesDelivered(t *testing.T) {
	c := build(t, 2)
	c.start(t, 1)
	for i := range 10 {
		send(t, c.ts[1], 0, int32(i), content(i, 100))
	}
	c.ts[1].abandon()
	c.ts[0].fakeDead(t, 1)
	c.start(t, 0)
	checkLost(t, c.rs[0].WaitLost(t, 1), 1, errPeerDied)
	if got := c.rs[0].WaitMsgs(t, 10); !bytes.Equal(got[9].Data, content(9, 100)) {
		t.Fatalf("last message %q", got[9].Data)
	}
}

// TestSendCancelledMidMessage cancels a send whose frame is half in the
// ring (streamed): the link is dropped on both sides and nothing is
// delivered. TestSingleCopySendWithdrawn is the single-copy case.
func TestSendCancelledMidMessage(t *testing.T) {
	for _, mode := range []struct {
		name       string
		singleCopy int
	}{{"streamed", 0}} {
		t.Run(mode.name, func(t *testing.T) {
			c := build(t, 2, WithRingSize(1<<16), WithSingleCopy(mode.singleCopy))
			c.start(t, 0) // rank 1 does not read yet
			ctx, cancel := context.WithCancel(context.Background())
			sent := sendAsync(ctx, c.ts[0], 1, 1<<20)
			for c.ts[1].seg.ring(0).c.tail.Load() == 0 {
				time.Sleep(time.Millisecond)
			}
			cancel()
			err := <-sent
			checkLost(t, err, 1, context.Canceled)
			checkLost(t, c.rs[0].WaitLost(t, 1), 1, context.Canceled)
			c.start(t, 1)
			checkLost(t, c.rs[1].WaitLost(t, 0), 0, errPeerBroke)
			if n := len(c.rs[1].WaitMsgs(t, 0)); n != 0 {
				t.Fatalf("%d messages delivered from a broken ring", n)
			}
		})
	}
}

func TestSendCancelledBeforeFirstByte(t *testing.T) {
	c := build(t, 2, WithRingSize(1<<16))
	c.start(t, 0)
	send(t, c.ts[0], 1, 1, make([]byte, 1<<16-frameHeaderSize-markerSize)) // fills the ring
	ctx, cancel := context.WithCancel(context.Background())
	sent := sendAsync(ctx, c.ts[0], 1, 10)
	cancel()
	if err := <-sent; !errors.Is(err, context.Canceled) || errors.Is(err, transport.ErrPeerLost) {
		t.Fatalf("send = %v, want a plain context.Canceled", err)
	}
	c.start(t, 1)
	send(t, c.ts[0], 1, 2, []byte("fine"))
	if got := c.rs[1].WaitMsgs(t, 2); string(got[1].Data) != "fine" {
		t.Fatalf("got %q", got[1].Data)
	}
}

func TestStrangerSegmentRefused(t *testing.T) {
	for _, tc := range []struct {
		name string
		make func(path string, c *cluster) error
	}{
		{"wrong secret", func(path string, c *cluster) error {
			mac := segmentMAC(newSecret(), c.job, 1, DefaultRingSize, []int{0, 1})
			s, err := createSegment(path, 1, DefaultRingSize, mac)
			if err == nil {
				s.unmap()
			}
			return err
		}},
		{"readable by others", func(path string, c *cluster) error {
			mac := segmentMAC(c.secret, c.job, 1, DefaultRingSize, []int{0, 1})
			s, err := createSegment(path, 1, DefaultRingSize, mac)
			if err == nil {
				s.unmap()
				err = os.Chmod(path, 0o644)
			}
			return err
		}},
		// The doorbell beside a segment of this job: a FIFO of this user,
		// mode 0600, or the segment is refused.
		{"doorbell a regular file", func(path string, c *cluster) error {
			mac := segmentMAC(c.secret, c.job, 1, DefaultRingSize, []int{0, 1})
			s, err := createSegment(path, 1, DefaultRingSize, mac)
			if err == nil {
				s.unmap()
				if err = os.Remove(bellPath(path)); err == nil {
					err = os.WriteFile(bellPath(path), nil, 0o600)
				}
			}
			return err
		}},
		{"doorbell writable by others", func(path string, c *cluster) error {
			mac := segmentMAC(c.secret, c.job, 1, DefaultRingSize, []int{0, 1})
			s, err := createSegment(path, 1, DefaultRingSize, mac)
			if err == nil {
				t.Cleanup(s.unmap) // its owner stays: the doorbell has a reader
				err = os.Chmod(bellPath(path), 0o622)
			}
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var lb logBuffer
			c := &cluster{job: newJobID(), secret: newSecret(), rs: []*transporttest.Recorder{transporttest.NewRecorder()}}
			path := segmentPath(Dir, c.job, 1, c.secret)
			if err := tc.make(path, c); err != nil {
				t.Fatal(err)
			}
			defer Cleanup(c.job)
			tr, err := New(c.job, 0, []int{0, 1}, 2, c.secret, WithLogger(lb.logger()))
			if err != nil {
				t.Fatal(err)
			}
			defer tr.Close()
			tr.Start(c.rs[0])
			checkLost(t, c.rs[0].WaitLost(t, 1), 1, errAuth)
			if !strings.Contains(lb.String(), "segment refused") {
				t.Fatalf("refusal not logged; log:\n%s", lb.String())
			}
		})
	}
}

func TestAttachTimeout(t *testing.T) {
	job, secret := newJobID(), newSecret()
	tr, err := New(job, 0, []int{0, 1}, 2, secret, WithAttachTimeout(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	r := transporttest.NewRecorder()
	tr.Start(r)
	checkLost(t, r.WaitLost(t, 1), 1, nil)
	if err := tr.Send(context.Background(), 1, transport.Header{}, nil); !errors.Is(err, transport.ErrPeerLost) {
		t.Fatalf("send to a peer that never came = %v", err)
	}
}

func TestFilesRemoved(t *testing.T) {
	c := newCluster(t, 3)
	send(t, c.ts[0], 1, 0, []byte("x"))
	send(t, c.ts[1], 2, 0, []byte("x"))
	send(t, c.ts[2], 0, 0, []byte("x"))
	for _, r := range c.rs {
		r.WaitMsgs(t, 1)
	}
	for start := time.Now(); len(jobFiles(t, c.job)) > 0; time.Sleep(time.Millisecond) {
		if time.Since(start) > waitLimit {
			t.Fatalf("files still there once every rank attached: %v", jobFiles(t, c.job))
		}
	}
	d := build(t, 3)
	d.start(t, 0)
	d.ts[1].abandon() // never started: its file stays
	d.ts[0].Close()
	if left := jobFiles(t, d.job); len(left) != 4 { // segment and doorbell
		t.Fatalf("after rank 0 closed: %v, want the files of ranks 1 and 2", left)
	}
	d.ts[2].Close()
	if err := Cleanup(d.job); err != nil {
		t.Fatal(err)
	}
	if left := jobFiles(t, d.job); len(left) != 0 {
		t.Fatalf("after Cleanup: %v", left)
	}
}

func TestCleanupSparesOtherJobs(t *testing.T) {
	job := newJobID()
	other := Dir + "/gorun-" + job + "-r1-x"                    // another job "<job>-r1-x"? not a segment name
	longer := Dir + "/gorun-" + job + "-r1-r0-0123456789abcdef" // job "<job>-r1"
	for _, p := range []string{other, longer} {
		if err := os.WriteFile(p, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		defer os.Remove(p)
	}
	if err := Cleanup(job); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{other, longer} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("Cleanup(%q) removed %s", job, p)
		}
	}
}

// logBuffer collects a transport's log.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func (l *logBuffer) logger() *log.Logger { return log.New(l, "", 0) }

// TestSingleCopySendWithdrawn cancels a blocking send whose single-copy
// descriptor is in the ring but not taken: the send fails with the
// context's error, the receiver drops the message unseen when it reads the
// descriptor, and the link stays up: the next message arrives. It broke
// the link on both sides, for every communicator between the two ranks.
func TestSingleCopySendWithdrawn(t *testing.T) {
	c := build(t, 2, WithRingSize(1<<16))
	c.start(t, 0) // rank 1 does not read yet
	ctx, cancel := context.WithCancel(context.Background())
	sent := sendAsync(ctx, c.ts[0], 1, 1<<20)
	for c.ts[1].seg.ring(0).c.tail.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	cancel()
	if err := <-sent; !errors.Is(err, context.Canceled) || errors.Is(err, transport.ErrPeerLost) {
		t.Fatalf("cancelled single-copy send: %v, want context.Canceled and the peer kept", err)
	}
	c.start(t, 1)
	send(t, c.ts[0], 1, 5, []byte("after"))
	got := c.rs[1].WaitMsgs(t, 1)
	if len(got) != 1 || string(got[0].Data) != "after" {
		t.Fatalf("rank 1 got %d messages, the first %q; want only \"after\"", len(got), got[0].Data)
	}
}
