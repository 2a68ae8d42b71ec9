package prims

import (
	"fmt"

	"github.com/gorun-hpc/gorun/spmd"
	"github.com/gorun-hpc/gorun/spmd/trace"
	"github.com/gorun-hpc/gorun/topo"
)

// traced is a collective call's record in the trace: started as the call
// starts, written as it ends. It lives in the call, which is pooled, so
// that tracing allocates nothing per call; a chosen algorithm's names and
// predicted time come with prims' cached choice, so that a call in a
// loop costs two clock reads, a walk of its stack and one locked encode.
type traced struct {
	rec   *trace.Recorder
	e     trace.Event
	stack trace.Stack
}

// start begins the record of a call of coll by algo on c. t.e holds the
// choice's predicted time and name ids when the algorithm was chosen.
func (t *traced) start(rec *trace.Recorder, st *state, c *spmd.Comm, coll topo.Collective, algo topo.Algo, bytes int, o Option) {
	e := trace.Event{
		Kind:      trace.CollectiveEvent,
		Comm:      c.ID(),
		Peer:      -1,
		Bytes:     int64(bytes),
		Seq:       rec.NextSeq(c.ID()),
		Predicted: t.e.Predicted,
		Name:      t.e.Name,
		Algo:      t.e.Algo,
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
