package spmd

import (
	"errors"
	"fmt"

	"github.com/gorun-hpc/gorun/spmd/transport"
)

// ErrFreed is wrapped by the errors of calls on a communicator that this
// rank has freed (Comm.Free).
var ErrFreed = errors.New("communicator freed")

// Freer is implemented by values attached to communicators (SetValue) that
// hold what a communicator's Free should let go of, as package prims's
// state holds sub-communicators. Free calls FreeComm with the communicator
// it frees; a value that Split copied from the parent is attached to the
// child too, so a value that belongs to another communicator keeps what it
// holds.
type Freer interface {
	FreeComm(c *Comm)
}

// Free lets go of what the communicator holds on this rank, as
// MPI_Comm_free does: its shared memory (Shared), the values packages
// attached to it (prims's state and sub-communicators, topo's model), its
// posted receives and the sends still queued behind others, which fail
// with an error that wraps ErrFreed. Messages that arrive for it later
// are dropped. Every later call on c, or on its collective context, fails
// with such an error; its ranks, and the communicators it was split from
// or split into, are not affected.
//
// Free is local: each rank frees its own communicators, once its last
// call on them has returned; a rank whose peers already freed theirs can
// no longer finish a call with them. A collective that runs on c from
// another goroutine while Free runs is the caller's error, as in MPI: its
// reads of shared memory return zeros, so it fails or waits for its
// context. Freeing the world is refused (close the World instead);
// freeing a freed communicator does nothing.
func (c *Comm) Free() error {
	base := c.base()
	if base == 0 {
		return fmt.Errorf("free: the world communicator cannot be freed; Close the World instead")
	}
	core := c.core
	if !core.engine.free(base, fmt.Errorf("comm %d: %w", base, ErrFreed)) {
		return nil
	}
	core.mu.Lock()
	var vals []any
	for k, v := range core.values {
		if k.comm == base {
			vals = append(vals, v)
			delete(core.values, k)
		}
	}
	core.valuesGen.Add(1)
	area, shared := core.shared[base]
	delete(core.shared, base)
	core.mu.Unlock()
	for _, v := range vals {
		if f, ok := v.(Freer); ok {
			f.FreeComm(c)
		}
	}
	if shared {
		if err := core.tr.(transport.Sharer).Unshare(area.key); err != nil {
			return fmt.Errorf("free of comm %d: %w", base, err)
		}
	}
	return nil
}

// free fails what is pending on both contexts of the communicator base
// with err and drops what arrived for them, and reports false if they
// were freed already.
func (e *engine) free(base uint32, err error) bool {
	var fail []*Request
	e.mu.Lock()
	if e.gone[base] != nil {
		e.mu.Unlock()
		return false
	}
	if e.gone == nil {
		e.gone = make(map[uint32]error)
	}
	e.gone[base], e.gone[base+1] = err, err
	for k, q := range e.queues {
		if k.comm != base && k.comm != base+1 {
			continue
		}
		fail = append(fail, q.posted.items()...)
		for _, in := range q.unexp.items() {
			switch {
			case in.offer != nil:
				in.offer.Release()
				in.recycle()
			case in.complete:
				in.recycle()
			} // one still arriving is dropped by Deliver
		}
		q.posted.reset()
		q.unexp.reset()
		delete(e.queues, k)
		e.forget(k, q)
		if len(e.spare) < 64 {
			e.spare = append(e.spare, q)
		}
	}
	for i := range e.senders {
		s := &e.senders[i]
		s.q.keep(func(r *Request) bool {
			if r.key.comm == base || r.key.comm == base+1 {
				fail = append(fail, r)
				return false
			}
			return true
		})
	}
	for _, r := range fail {
		r.stage = reqDone
	}
	e.mu.Unlock()
	for _, r := range fail {
		r.finish(0, err)
	}
	return true
}

// freed returns the error of calls on communicator id once it is freed
// here, or nil.
func (e *engine) freed(id uint32) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.gone[id]
}
