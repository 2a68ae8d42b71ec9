package mem

import (
	"context"
	"fmt"
	"sync"
	"unsafe"

	"github.com/gorun-hpc/gorun/spmd/transport"
)

// Network joins the transports of the ranks of one test job.
type Network struct {
	ranks []*Transport

	mu     sync.Mutex
	shares map[string][]byte // guarded by mu: the areas of Share, by key
}

// NewNetwork returns a network of n ranks.
func NewNetwork(n int) *Network {
	nw := &Network{ranks: make([]*Transport, n)}
	for i := range nw.ranks {
		nw.ranks[i] = &Transport{nw: nw, rank: i, started: make(chan struct{})}
	}
	return nw
}

// Transport returns the transport of rank r.
func (nw *Network) Transport(r int) *Transport { return nw.ranks[r] }

// Size returns the number of ranks.
func (nw *Network) Size() int { return len(nw.ranks) }

// Kill makes rank r vanish as a crashed process would: every other rank is
// told it is lost, and its own sends and receives fail.
func (nw *Network) Kill(r int) { nw.ranks[r].die(fmt.Errorf("killed")) }

// Transport is one rank's end of a Network.
type Transport struct {
	nw      *Network
	rank    int
	started chan struct{} // closed by Start
	h       transport.Handler

	// alive is held for reading while this rank delivers a message, and for
	// writing when it dies, so no delivery from it follows its loss.
	alive sync.RWMutex
	dead  error // guarded by alive
}

var (
	_ transport.Transport = (*Transport)(nil)
	_ transport.Sharer    = (*Transport)(nil)
)

// Shares implements transport.Sharer: the ranks of a network share one
// process, so any of them can share memory.
func (t *Transport) Shares(ranks []int) bool {
	for _, r := range ranks {
		if r < 0 || r >= len(t.nw.ranks) {
			return false
		}
	}
	return len(ranks) > 0
}

// Share implements transport.Sharer with memory of the process, 8-byte
// aligned as a mapping's is page-aligned.
func (t *Transport) Share(key string, ranks []int, size int) ([]byte, error) {
	if !t.Shares(ranks) || size <= 0 {
		return nil, fmt.Errorf("mem: cannot share %d bytes among ranks %v", size, ranks)
	}
	t.nw.mu.Lock()
	defer t.nw.mu.Unlock()
	if mem, ok := t.nw.shares[key]; ok {
		if len(mem) != size {
			return nil, fmt.Errorf("mem: shared area %q has %d bytes, asked for %d", key, len(mem), size)
		}
		return mem, nil
	}
	if t.nw.shares == nil {
		t.nw.shares = make(map[string][]byte)
	}
	words := make([]uint64, (size+7)/8)
	mem := unsafe.Slice((*byte)(unsafe.Pointer(&words[0])), size)
	t.nw.shares[key] = mem
	return mem, nil
}

// Unshare implements transport.Sharer: the area of key is forgotten, and
// goes with the last of its users; a later Share of key maps a new one.
func (t *Transport) Unshare(key string) error {
	t.nw.mu.Lock()
	defer t.nw.mu.Unlock()
	delete(t.nw.shares, key)
	return nil
}

// Start implements transport.Transport.
func (t *Transport) Start(h transport.Handler) error {
	t.h = h
	close(t.started)
	for _, o := range t.nw.ranks {
		o.alive.RLock()
		gone := o.dead
		o.alive.RUnlock()
		if gone != nil && o != t {
			h.Lost(o.rank, transport.Lost(o.rank, "mem", gone))
		}
	}
	return nil
}

// Send implements transport.Transport: the message is copied into dst's
// posted buffer (or an unexpected one) before Send returns.
func (t *Transport) Send(ctx context.Context, peer int, h transport.Header, payload []byte) error {
	if peer < 0 || peer >= len(t.nw.ranks) || peer == t.rank {
		return fmt.Errorf("mem: send from rank %d to rank %d of %d", t.rank, peer, len(t.nw.ranks))
	}
	if err := ctx.Err(); err != nil {
		return err // as the real transports do; the select below picks at random
	}
	dst := t.nw.ranks[peer]
	select {
	case <-dst.started:
	case <-ctx.Done():
		return ctx.Err()
	}
	t.alive.RLock()
	defer t.alive.RUnlock()
	if t.dead != nil {
		return transport.Lost(t.rank, "mem", t.dead)
	}
	dst.alive.RLock()
	gone := dst.dead
	dst.alive.RUnlock()
	if gone != nil {
		return transport.Lost(peer, "mem", gone)
	}
	buf := dst.h.Buffer(t.rank, h)
	copy(buf, payload)
	dst.h.Deliver(t.rank, h, buf)
	return nil
}

// Watch implements transport.Transport; losses are reported when they happen.
func (t *Transport) Watch(int) {}

// Close implements transport.Transport: the rank leaves the network.
func (t *Transport) Close() error {
	t.die(transport.ErrClosed)
	return nil
}

func (t *Transport) die(cause error) {
	t.alive.Lock()
	if t.dead != nil {
		t.alive.Unlock()
		return
	}
	t.dead = cause
	t.alive.Unlock()
	for _, o := range t.nw.ranks {
		if o == t {
			continue
		}
		select {
		case <-o.started:
			o.h.Lost(t.rank, transport.Lost(t.rank, "mem", cause))
		default:
		}
		select {
		case <-t.started:
			// As the other transports do, a Close reports the peers
			// with ErrClosed alone: they were not lost.
			var err error = &transport.PeerError{Rank: o.rank, Addr: "mem", Err: cause}
			if cause != transport.ErrClosed {
				err = transport.Lost(o.rank, "mem", cause)
			}
			t.h.Lost(o.rank, err)
		default:
		}
	}
}
