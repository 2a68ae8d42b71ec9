package spmd

import "github.com/gorun-hpc/gorun/spmd/trace"

// traced is what a request of a traced communicator remembers, to record
// itself once its owner sees it complete (Wait or Test).
type traced struct {
	rec   *trace.Recorder
	kind  trace.Kind
	flags trace.Flags
	comm  uint32
	peer  int32
	tag   int32
	start int64
	stack trace.Stack // the caller's, resolved to its site when recorded
}

// traceRequest makes r record itself, when c is traced and is not a
// collective context (collectives are recorded whole, by prims).
func (c *Comm) traceRequest(r *Request, kind trace.Kind, peer, tag int, nonBlocking bool) {
	t := c.core.trace
	if t == nil || c.coll {
		return
	}
	tr := &traced{rec: t, kind: kind, comm: c.id, peer: int32(peer), tag: int32(tag)}
	if nonBlocking {
		tr.flags = trace.NonBlocking
	}
	t.Caller(&tr.stack)
	tr.start = t.Now()
	r.tr = tr
}

// record writes r's event, and for a non-blocking request whose Wait
// blocked from waitStart, the wait's.
func (tr *traced) record(r *Request, waitStart int64) {
	now := tr.rec.Now()
	flags := tr.flags
	if r.err != nil {
		flags |= trace.Failed
	}
	e := trace.Event{Kind: tr.kind, Flags: flags, Start: tr.start, End: now, Comm: tr.comm, Peer: tr.peer, Tag: tr.tag, Bytes: int64(r.n)}
	e.Site = tr.rec.RecordStack(e, &tr.stack)
	if waitStart != 0 && tr.flags&trace.NonBlocking != 0 {
		e.Kind, e.Start = trace.WaitEvent, waitStart
		tr.rec.Record(e, tr.kind.String(), "")
	}
}
