package tcp_test

import (
	"context"
	"fmt"

	"github.com/gorun-hpc/gorun/net/tcp"
	"github.com/gorun-hpc/gorun/spmd/transport"
)

// printer is a minimal Handler: it allocates a buffer per message and
// passes each one on.
type printer chan string

func (p printer) Buffer(_ int, h transport.Header) []byte { return make([]byte, h.Len) }

func (p printer) Deliver(peer int, h transport.Header, b []byte) {
	p <- fmt.Sprintf("from rank %d, tag %d: %s", peer, h.Tag, b)
}

func (p printer) Lost(int, error) {}

// Two ranks of one job, here in one process: each opens its listener, learns
// the other's address, and rank 0 sends rank 1 a message.
func Example() {
	secret := []byte("per-job secret from the launcher")
	var lns [2]*tcp.Listener
	var addrs []string
	for i := range lns {
		l, err := tcp.Listen("127.0.0.1:0")
		if err != nil {
			fmt.Println(err)
			return
		}
		lns[i] = l
		addrs = append(addrs, l.Addr())
	}
	inbox := make(printer, 1)
	var ts [2]*tcp.Transport
	for i := range ts {
		ts[i] = tcp.New(lns[i], i, addrs, secret)
		defer ts[i].Close()
		if err := ts[i].Start(inbox); err != nil {
			fmt.Println(err)
			return
		}
	}
	msg := []byte("hello")
	err := ts[0].Send(context.Background(), 1, transport.Header{Tag: 3, Len: len(msg)}, msg)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(<-inbox)
	// Output: from rank 0, tag 3: hello
}
