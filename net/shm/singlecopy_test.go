package shm

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/gorun-hpc/gorun/spmd/transport"
	"golang.org/x/sys/unix"
)

// doneRec is a transport.Done that records what it is told.
type doneRec chan error

func (d doneRec) SendDone(err error) { d <- err }

func (d doneRec) wait(tb testing.TB) error {
	tb.Helper()
	select {
	case err := <-d:
		return err
	case <-time.After(waitLimit):
		tb.Fatal("a started send was never completed")
		return nil
	}
}

// proveCopy sends one single-copy message from rank 0 to rank 1 and waits
// until rank 1's consumer has said it can read rank 0's memory.
func proveCopy(tb testing.TB, c *cluster) {
	tb.Helper()
	send(tb, c.ts[0], 1, 99, content(99, DefaultSingleCopy))
	if c.ts[0].peers[1].out.r.c.copyOK.Load() != 1 {
		tb.Fatal("copyOK not set after a single-copy send")
	}
}

func TestSingleCopyDelivers(t *testing.T) {
	c := newCluster(t, 2, WithRingSize(1<<16))
	sizes := []int{DefaultSingleCopy - 1, DefaultSingleCopy, 1<<20 + 3, 5 << 20, 10, DefaultSingleCopy}
	for i, n := range sizes {
		send(t, c.ts[0], 1, int32(i), content(i, n))
	}
	got := c.rs[1].WaitMsgs(t, len(sizes))
	for i, m := range got {
		if m.Header.Tag != int32(i) || !bytes.Equal(m.Data, content(i, sizes[i])) {
			t.Fatalf("message %d: tag %d, %d bytes, content differs", i, m.Header.Tag, len(m.Data))
		}
	}
	if c.ts[0].peers[1].out.r.c.noCopy.Load() != 0 {
		t.Fatal("noCopy set where the kernel allows the reads")
	}
}

func TestStartSend(t *testing.T) {
	c := newCluster(t, 2)
	ctx := context.Background()
	big := content(0, 2*DefaultSingleCopy)
	h := transport.Header{Tag: 1, Len: len(big)}
	if ok, err := c.ts[0].StartSend(1, h, big, make(doneRec, 1)); ok || err != nil {
		t.Fatalf("StartSend before the consumer proved it can copy = %v, %v; want false", ok, err)
	}
	proveCopy(t, c)
	small := []byte("small")
	if ok, _ := c.ts[0].StartSend(1, transport.Header{Len: len(small)}, small, make(doneRec, 1)); ok {
		t.Fatal("StartSend took a message below the single-copy size")
	}
	// Started sends, with plain ones between them: all arrive in order,
	// each started one is completed once its payload is taken.
	const n = 20
	var dones []doneRec
	var want [][]byte
	for i := range n {
		p := content(i, DefaultSingleCopy+i*1000)
		d := make(doneRec, 1)
		ok, err := c.ts[0].StartSend(1, transport.Header{Tag: int32(2 * i), Len: len(p)}, p, d)
		if !ok || err != nil {
			t.Fatalf("StartSend %d = %v, %v", i, ok, err)
		}
		dones = append(dones, d)
		want = append(want, p)
		q := content(1000+i, 100)
		if err := c.ts[0].Send(ctx, 1, transport.Header{Tag: int32(2*i + 1), Len: len(q)}, q); err != nil {
			t.Fatal(err)
		}
		want = append(want, q)
	}
	for i, d := range dones {
		if err := d.wait(t); err != nil {
			t.Fatalf("started send %d completed with %v", i, err)
		}
	}
	got := c.rs[1].WaitMsgs(t, 1+len(want))[1:]
	for i, m := range got {
		if m.Header.Tag != int32(i) || !bytes.Equal(m.Data, want[i]) {
			t.Fatalf("message %d: tag %d, %d bytes, content differs", i, m.Header.Tag, len(m.Data))
		}
	}
	if k := c.ts[0].offering.Load(); k != 0 {
		t.Fatalf("%d offers still listed after all completed", k)
	}
}

func TestStartSendPeerLost(t *testing.T) {
	c := newCluster(t, 2)
	proveCopy(t, c)
	c.ts[1].abandon() // nobody takes the payload
	p := content(1, DefaultSingleCopy)
	d := make(doneRec, 1)
	if ok, err := c.ts[0].StartSend(1, transport.Header{Len: len(p)}, p, d); !ok || err != nil {
		t.Fatalf("StartSend = %v, %v", ok, err)
	}
	c.ts[0].fakeDead(t, 1)
	checkLost(t, d.wait(t), 1, errPeerDied)
}

func TestStartSendClose(t *testing.T) {
	c := newCluster(t, 2)
	proveCopy(t, c)
	c.ts[1].abandon()
	p := content(1, DefaultSingleCopy)
	d := make(doneRec, 1)
	if ok, err := c.ts[0].StartSend(1, transport.Header{Len: len(p)}, p, d); !ok || err != nil {
		t.Fatalf("StartSend = %v, %v", ok, err)
	}
	c.ts[0].Close()
	if err := d.wait(t); !errors.Is(err, transport.ErrClosed) {
		t.Fatalf("started send after Close = %v, want ErrClosed", err)
	}
}

func TestSingleCopyRefused(t *testing.T) {
	processVMReadv = func(int, []unix.Iovec, []unix.RemoteIovec, uint) (int, error) { return 0, unix.EPERM }
	t.Cleanup(func() { processVMReadv = unix.ProcessVMReadv })
	c := newCluster(t, 2, WithRingSize(1<<16))
	sizes := []int{1 << 20, DefaultSingleCopy, 3 << 20}
	for i, n := range sizes {
		send(t, c.ts[0], 1, int32(i), content(i, n))
	}
	got := c.rs[1].WaitMsgs(t, len(sizes))
	for i, m := range got {
		if !bytes.Equal(m.Data, content(i, sizes[i])) {
			t.Fatalf("message %d: %d bytes, content differs", i, len(m.Data))
		}
	}
	if c.ts[0].peers[1].out.r.c.noCopy.Load() != 1 {
		t.Fatal("noCopy not set after the kernel refused the read")
	}
	p := content(9, DefaultSingleCopy)
	if ok, _ := c.ts[0].StartSend(1, transport.Header{Len: len(p)}, p, make(doneRec, 1)); ok {
		t.Fatal("StartSend took a message to a consumer that cannot copy")
	}
}
