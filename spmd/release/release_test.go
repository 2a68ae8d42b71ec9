package release

import (
	"sync/atomic"
	"testing"
)

// TestStores checks that the stores write the whole word and nothing
// beside it.
func TestStores(t *testing.T) {
	var w struct {
		before atomic.Uint64
		a      atomic.Uint32
		b      atomic.Uint32
		c      atomic.Uint64
		after  atomic.Uint64
	}
	Store32(&w.a, 0xdeadbeef)
	Store64(&w.c, 0x0123456789abcdef)
	if w.a.Load() != 0xdeadbeef || w.c.Load() != 0x0123456789abcdef {
		t.Fatalf("stored %#x and %#x", w.a.Load(), w.c.Load())
	}
	if w.before.Load() != 0 || w.b.Load() != 0 || w.after.Load() != 0 {
		t.Fatalf("a store wrote beside its word: %#x %#x %#x", w.before.Load(), w.b.Load(), w.after.Load())
	}
}

// TestPublishes has one goroutine publish values through a word with
// release stores and another check that every payload written before a
// store is seen with it.
func TestPublishes(t *testing.T) {
	const n = 200000
	var payload [8]uint64
	var seq atomic.Uint64
	var ack atomic.Uint64
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := uint64(1); i <= n; i++ {
			for ack.Load() != i-1 {
			}
			for j := range payload {
				payload[j] = i
			}
			Store64(&seq, i)
		}
	}()
	for i := uint64(1); i <= n; i++ {
		for seq.Load() != i {
		}
		for j, v := range payload {
			if v != i {
				t.Errorf("message %d: payload word %d is %d", i, j, v)
			}
		}
		ack.Store(i)
	}
	<-done
}
