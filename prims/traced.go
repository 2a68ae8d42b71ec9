package prims

import (
	"fmt"
	"sync"

	"github.com/gorun-hpc/gorun/spmd"
	"github.com/gorun-hpc/gorun/spmd/trace"
	"github.com/gorun-hpc/gorun/topo"
)

// traced is a collective call's record in the trace: started as the call
// starts, written as it ends. Records are pooled (tracedPool), so that
// tracing allocates nothing per call; a chosen algorithm's names and
// predicted time come with prims' cached choice, so that a call in a
// loop costs two clock reads, a walk of its stack and one locked encode.
// A call that is not traced has none: the record, mostly its stack, is
// larger than the rest of the call, which every call clears twice.
type traced struct {
	rec   *trace.Recorder
	e     trace.Event
	stack trace.Stack
}

var tracedPool = sync.Pool{New: func() any { return new(traced) }}

// start begins the record of a call of coll by algo on c; ch is the
// choice that picked algo, zero when none did.
func (t *traced) start(rec *trace.Recorder, st *state, c *spmd.Comm, coll topo.Collective, algo topo.Algo, bytes int, o Option, ch choice) {
	e := trace.Event{
		Kind:      trace.CollectiveEvent,
		Comm:      c.ID(),
		Peer:      -1,
		Bytes:     int64(bytes),
		Seq:       rec.NextSeq(c.ID()),
		Predicted: int64(ch.pred),
		Name:      ch.name,
		Algo:      ch.algoID,
		Site:      o.site,
	}
	if e.Name == 0 { // a forced algorithm, or a trivial call: no choice
		key := choiceKey{coll, bytes}
		f := st.forced.Load()
		if f == nil || f.key != key || f.algo != algo {
			f = &forcedChoice{choice{key: key, algo: algo, name: rec.Intern(coll.String()), algoID: rec.Intern(string(algo)),
				pred: predicted(c, coll, algo, bytes)}}
			st.forced.Store(f)
		}
		e.Name, e.Algo, e.Predicted = f.name, f.algoID, int64(f.pred)
	}
	t.rec = rec
	if o.queued {
		e.Flags = trace.NonBlocking
		e.Track = st.asyncTrack.Load()
		if e.Track == 0 {
			e.Track = rec.Intern(asyncTrack(c.ID()))
			st.asyncTrack.Store(e.Track)
		}
		t.stack = trace.Stack{}
	} else if e.Site == 0 {
		rec.Caller(&t.stack)
	}
	e.Start = rec.Now()
	t.e = e
}

// asyncTrack names the track of communicator id's non-blocking collectives.
func asyncTrack(id uint32) string { return fmt.Sprintf("comm %d async", id) }

// record writes the call, ended now with err.
func (t *traced) record(err error) {
	if err != nil {
		t.e.Flags |= trace.Failed
	}
	t.rec.RecordStack(t.e, &t.stack)
	t.rec = nil
}
