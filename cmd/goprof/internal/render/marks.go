package render

import (
	"github.com/gorun-hpc/gorun/cmd/goprof/internal/job"
	"github.com/gorun-hpc/gorun/spmd/trace"
)

// collWait is the part of a collective call spent waiting for the last
// member to enter: from the call's start to until.
type collWait struct {
	until int64
	last  int // the rank that entered last
}

// lateWait is the part of a receive (or of the wait for a non-blocking
// one) spent waiting for a message not yet sent: lost ns from its start.
type lateWait struct {
	lost   int64
	sender int
}

// marks are the waits drawn over the calls they happened in.
type marks struct {
	wait map[job.Ref]collWait // by collective call
	late map[job.Ref]lateWait // by blocking receive, or wait for a non-blocking one
}

// findMarks finds the waiting in j's collectives and its late senders, as
// report measures them: a call of a complete collective instance waits
// from its start to the last member's entry (or its own end, if sooner);
// a receive waits from when the rank began to wait for it (the blocking
// receive's post, or the wait for a non-blocking one) to the send's post.
func findMarks(j *job.Job) marks {
	m := marks{wait: map[job.Ref]collWait{}, late: map[job.Ref]lateWait{}}
	for _, in := range j.Collectives() {
		if !in.Complete() || len(in.Calls) < 2 {
			continue
		}
		last, lastRank := int64(0), -1
		for k, c := range in.Calls {
			e := j.Event(c)
			if k == 0 || e.Start > last {
				last, lastRank = e.Start, c.Rank
			}
		}
		for _, c := range in.Calls {
			e := j.Event(c)
			if until := min(last, e.End); until > e.Start {
				m.wait[c] = collWait{until, lastRank}
			}
		}
	}
	m.lateSenders(j)
	return m
}

func (m *marks) lateSenders(j *job.Job) {
	recv := lookup(j, trace.RecvEvent.String())
	type waitKey struct {
		rank      int
		end       int64
		comm      uint32
		peer, tag int32
	}
	waits := map[waitKey]job.Ref{}
	for _, x := range j.Present() {
		for i := range x.Events {
			e := &x.Events[i]
			if e.Kind == trace.WaitEvent && recv != 0 && e.Name == recv {
				waits[waitKey{x.Rank, e.End, e.Comm, e.Peer, e.Tag}] = job.Ref{Rank: x.Rank, Index: i}
			}
		}
	}
	for _, msg := range j.Messages() {
		s, rv := j.Event(msg.Send), j.Event(msg.Recv)
		at, from, to := msg.Recv, rv.Start, rv.End
		if rv.Flags&trace.NonBlocking != 0 {
			w, ok := waits[waitKey{msg.Recv.Rank, rv.End, rv.Comm, rv.Peer, rv.Tag}]
			if !ok {
				continue // it arrived before anyone waited for it
			}
			at = w
			from, to = j.Event(w).Start, j.Event(w).End
		}
		if lost := min(s.Start, to) - from; lost > 0 {
			m.late[at] = lateWait{lost, msg.Send.Rank}
		}
	}
}

// lookup returns the id of s in j's strings without adding it; 0 when j
// has none.
func lookup(j *job.Job, s string) uint32 {
	for i, t := range j.Strings {
		if t == s {
			return uint32(i)
		}
	}
	return 0
}
