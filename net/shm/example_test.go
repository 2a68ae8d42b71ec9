package shm_test

import (
	"context"
	"crypto/rand"
	"fmt"

	"github.com/gorun-hpc/gorun/net/shm"
	"github.com/gorun-hpc/gorun/spmd/transport"
)

// printer is the smallest Handler: a fresh buffer per message, printed on
// delivery.
type printer struct{ done chan struct{} }

func (p printer) Buffer(_ int, h transport.Header) []byte { return make([]byte, h.Len) }
func (p printer) Deliver(peer int, h transport.Header, b []byte) {
	fmt.Printf("from rank %d, tag %d: %s\n", peer, h.Tag, b)
	close(p.done)
}
func (p printer) Lost(int, error) {}

// Two ranks of one host, here two transports of one process, exchange a
// message through /dev/shm.
func Example() {
	secret := make([]byte, 32)
	rand.Read(secret)
	job := "example-" + rand.Text()[:8]
	defer shm.Cleanup(job) // the launcher's part: nothing of the job remains

	local := []int{0, 1} // both ranks of a 2-rank job run on this host
	a, err := shm.New(job, 0, local, 2, secret)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer a.Close()
	b, err := shm.New(job, 1, local, 2, secret)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer b.Close()
	got := printer{done: make(chan struct{})}
	a.Start(printer{done: make(chan struct{})})
	b.Start(got)

	msg := []byte("hello over shared memory")
	if err := a.Send(context.Background(), 1, transport.Header{Tag: 5, Len: len(msg)}, msg); err != nil {
		fmt.Println(err)
		return
	}
	<-got.done
	// Output: from rank 0, tag 5: hello over shared memory
}
