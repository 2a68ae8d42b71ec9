package prims

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/gorun-hpc/gorun/spmd"
	"github.com/gorun-hpc/gorun/spmd/spmdtest"
	"github.com/gorun-hpc/gorun/spmd/transport"
)

// holder is a transport whose started sends stay started until taken
// back; it records the order they are taken back in (by first byte).
type holder struct {
	mu    sync.Mutex
	sends map[transport.Done]byte
	back  []byte
}

func (h *holder) Start(transport.Handler) error { return nil }
func (h *holder) Watch(int)                     {}
func (h *holder) Close() error                  { return nil }
func (h *holder) Send(context.Context, int, transport.Header, []byte) error {
	return errors.New("holder: only started sends")
}

func (h *holder) StartSend(_ int, _ transport.Header, p []byte, done transport.Done) (bool, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.sends[done] = p[0]
	return true, nil
}

func (h *holder) Withdraw(_ int, done transport.Done, cause error) bool {
	h.mu.Lock()
	b, ok := h.sends[done]
	delete(h.sends, done)
	if ok {
		h.back = append(h.back, b)
	}
	h.mu.Unlock()
	if ok {
		done.SendDone(cause)
	}
	return ok
}

// A step's sends that its context's end leaves untaken are taken back
// from the last to the first, whether waitAll or abort does it, so that
// what still reaches the peer is a prefix of them.
func TestPendingTakesBackLastFirst(t *testing.T) {
	for _, how := range []string{"waitAll", "abort"} {
		t.Run(how, func(t *testing.T) {
			h := &holder{sends: map[transport.Done]byte{}}
			w, err := spmd.New(h, 0, spmdtest.Peers(2, "h"))
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			ctx, cancel := context.WithCancel(context.Background())
			p := newPending()
			for b := range byte(4) {
				p.isend(ctx, w.Comm, 1, 7, []byte{b})
			}
			cancel()
			if how == "waitAll" {
				if err := p.waitAll(ctx); !errors.Is(err, context.Canceled) {
					t.Errorf("waitAll: %v, want context.Canceled", err)
				}
			} else {
				p.abort()
			}
			if want := []byte{3, 2, 1, 0}; !slices.Equal(h.back, want) {
				t.Errorf("sends taken back in the order %v, want %v", h.back, want)
			}
		})
	}
}
