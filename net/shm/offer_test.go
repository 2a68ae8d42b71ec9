package shm

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/gorun-hpc/gorun/spmd/transport"
	"github.com/gorun-hpc/gorun/spmd/transport/transporttest"
)

// keeper is a transport.Offerer that keeps every offer for the test to
// take, and records streamed messages as a Recorder does.
type keeper struct {
	*transporttest.Recorder
	offers chan kept
}

type kept struct {
	h transport.Header
	o transport.Offer
}

func (k keeper) Offer(_ int, h transport.Header, o transport.Offer) { k.offers <- kept{h, o} }

func (k keeper) next(tb testing.TB) kept {
	tb.Helper()
	select {
	case x := <-k.offers:
		return x
	case <-time.After(waitLimit):
		tb.Fatal("no offer came")
		return kept{}
	}
}

// take takes x whole and checks it against want.
func (x kept) take(tb testing.TB, want []byte) {
	tb.Helper()
	buf := make([]byte, x.h.Len)
	if err := x.o.Take(buf); err != nil {
		tb.Fatalf("taking the offer of tag %d: %v", x.h.Tag, err)
	}
	if !bytes.Equal(buf, want) {
		tb.Fatalf("the offer of tag %d holds other bytes", x.h.Tag)
	}
}

// newKept starts ranks 0 and 1, rank 1 keeping its offers, and proves
// that rank 1 can read rank 0's memory.
func newKept(t *testing.T) (*cluster, keeper) {
	c := build(t, 2)
	c.start(t, 0)
	k := keeper{Recorder: c.rs[1], offers: make(chan kept, 16)}
	if err := c.ts[1].Start(k); err != nil {
		t.Fatal(err)
	}
	proveCopy(t, c)
	return c, k
}

// startSend starts a single-copy send of p from rank 0 to rank 1.
func startSend(t *testing.T, c *cluster, tag int32, p []byte) doneRec {
	t.Helper()
	d := make(doneRec, 1)
	if ok, err := c.ts[0].StartSend(1, transport.Header{Tag: tag, Len: len(p)}, p, d); !ok || err != nil {
		t.Fatalf("StartSend of tag %d = %v, %v", tag, ok, err)
	}
	return d
}

// Offers are kept aside while the ring moves on, and taken in any order:
// a later message, streamed or offered, is not held up by an earlier
// offer nobody has taken.
func TestOffersTakenOutOfOrder(t *testing.T) {
	c, k := newKept(t)
	a, b := content(1, DefaultSingleCopy), content(2, 2*DefaultSingleCopy+5)
	da, db := startSend(t, c, 1, a), startSend(t, c, 2, b)
	send(t, c.ts[0], 1, 3, []byte("after"))
	if got := c.rs[1].WaitMsgs(t, 2); string(got[1].Data) != "after" {
		t.Fatalf("streamed message: %q", got[1].Data)
	}
	xa, xb := k.next(t), k.next(t)
	if xa.h.Tag != 1 || xb.h.Tag != 2 {
		t.Fatalf("offers of tags %d, %d; want 1, 2", xa.h.Tag, xb.h.Tag)
	}
	xb.take(t, b)
	if err := db.wait(t); err != nil {
		t.Fatalf("the send taken first completed with %v", err)
	}
	select {
	case err := <-da:
		t.Fatalf("the send not taken yet completed (%v)", err)
	case <-time.After(20 * time.Millisecond):
	}
	xa.take(t, a)
	if err := da.wait(t); err != nil {
		t.Fatalf("the send taken last completed with %v", err)
	}
	if k := c.ts[0].offering.Load(); k != 0 {
		t.Fatalf("%d offers still listed after all completed", k)
	}
}

// A blocking Send's payload is taken at once, even by a handler that
// keeps offers: a Send completes whether or not its receive is posted.
func TestBlockingSendNotKept(t *testing.T) {
	c, k := newKept(t)
	d := startSend(t, c, 1, content(1, DefaultSingleCopy))
	p := content(2, DefaultSingleCopy)
	send(t, c.ts[0], 1, 2, p)
	if got := c.rs[1].WaitMsgs(t, 2); got[1].Header.Tag != 2 || !bytes.Equal(got[1].Data, p) {
		t.Fatalf("the blocking send's message: tag %d, %d bytes", got[1].Header.Tag, len(got[1].Data))
	}
	k.next(t).take(t, content(1, DefaultSingleCopy))
	if err := d.wait(t); err != nil {
		t.Fatal(err)
	}
}

// A receive shorter than the offer takes its head; the send completes.
func TestOfferTakenShort(t *testing.T) {
	c, k := newKept(t)
	p := content(5, DefaultSingleCopy)
	d := startSend(t, c, 5, p)
	buf := make([]byte, 100)
	if err := k.next(t).o.Take(buf); err != nil || !bytes.Equal(buf, p[:100]) {
		t.Fatalf("Take of 100 bytes = %v", err)
	}
	if err := d.wait(t); err != nil {
		t.Fatal(err)
	}
}

// A sender that closes withdraws the offers not taken yet: its sends
// fail as closed, and taking such an offer fails as a lost peer, never
// copying a payload its sender has been given back.
func TestOfferWithdrawnOnClose(t *testing.T) {
	c, k := newKept(t)
	d := startSend(t, c, 1, content(1, DefaultSingleCopy))
	x := k.next(t)
	c.ts[0].Close()
	if err := d.wait(t); !errors.Is(err, transport.ErrClosed) {
		t.Fatalf("started send after Close = %v, want ErrClosed", err)
	}
	if err := x.o.Take(make([]byte, x.h.Len)); !errors.Is(err, transport.ErrPeerLost) || !errors.Is(err, errPeerBroke) {
		t.Fatalf("Take of a withdrawn offer = %v, want a lost peer that broke the link", err)
	}
}

// An offer taken after its receiver's Close fails as closed.
func TestOfferAfterClose(t *testing.T) {
	c, k := newKept(t)
	d := startSend(t, c, 1, content(1, DefaultSingleCopy))
	x := k.next(t)
	c.ts[1].Close()
	if err := x.o.Take(make([]byte, x.h.Len)); !errors.Is(err, transport.ErrClosed) {
		t.Fatalf("Take after Close = %v, want ErrClosed", err)
	}
	checkLost(t, d.wait(t), 1, nil)
}

// A started send that nobody has begun to take can be withdrawn: its done
// hears why, taking it fails with ErrWithdrawn, and the link stays up: a
// later message arrives, and the slot serves again. One being taken or
// taken cannot be withdrawn.
func TestWithdrawStarted(t *testing.T) {
	c, k := newKept(t)
	d := startSend(t, c, 1, content(1, DefaultSingleCopy))
	x := k.next(t)
	cause := errors.New("caller gave up")
	if !c.ts[0].Withdraw(1, d, cause) {
		t.Fatal("Withdraw of an offer nobody took = false")
	}
	if err := d.wait(t); !errors.Is(err, cause) || errors.Is(err, transport.ErrPeerLost) {
		t.Fatalf("withdrawn send completed with %v, want the cause, the peer kept", err)
	}
	if err := x.o.Take(make([]byte, x.h.Len)); !errors.Is(err, transport.ErrWithdrawn) {
		t.Fatalf("Take of a withdrawn offer = %v, want ErrWithdrawn", err)
	}
	if c.ts[0].Withdraw(1, d, cause) {
		t.Fatal("a second Withdraw succeeded")
	}
	for i := range offerSlots + 1 { // every slot again, the withdrawn one too
		p := content(i, DefaultSingleCopy)
		d := startSend(t, c, int32(10+i), p)
		k.next(t).take(t, p)
		if err := d.wait(t); err != nil {
			t.Fatalf("send %d after a withdrawal: %v", i, err)
		}
	}
}

// An offer released untaken (its receiver freed the communicator) drops
// the message: its started send completes as though taken, and the link
// stays up.
func TestReleaseDropsOffer(t *testing.T) {
	c, k := newKept(t)
	d := startSend(t, c, 1, content(1, DefaultSingleCopy))
	k.next(t).o.Release()
	if err := d.wait(t); err != nil {
		t.Fatalf("a released offer's send completed with %v", err)
	}
	p := content(2, DefaultSingleCopy)
	d = startSend(t, c, 2, p)
	k.next(t).take(t, p)
	if err := d.wait(t); err != nil {
		t.Fatal(err)
	}
}

func TestWithdrawTaken(t *testing.T) {
	c, k := newKept(t)
	p := content(1, DefaultSingleCopy)
	d := startSend(t, c, 1, p)
	k.next(t).take(t, p)
	if c.ts[0].Withdraw(1, d, errors.New("late")) {
		t.Fatal("Withdraw of a taken offer succeeded")
	}
	if err := d.wait(t); err != nil {
		t.Fatal(err)
	}
}
