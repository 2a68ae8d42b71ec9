package job

import (
	"slices"
	"sort"

	"github.com/gorun-hpc/gorun/spmd/trace"
)

// Ref names one event: Job.Ranks[Rank].Events[Index].
type Ref struct {
	Rank, Index int
}

// Event returns the event r names.
func (j *Job) Event(r Ref) *trace.Event { return &j.Ranks[r.Rank].Events[r.Index] }

// Message is a send matched with its receive.
type Message struct {
	Send, Recv Ref
}

// Messages matches every send with its receive: per communicator, sender,
// receiver and tag, the n-th send posted goes to the n-th receive posted,
// as MPI's non-overtaking rule has it. Sends or receives whose partner is
// not in the trace (a missing rank, a window, a crash) stay unmatched.
func (j *Job) Messages() []Message {
	type key struct {
		comm     uint32
		from, to int
		tag      int32
	}
	sends := map[key][]Ref{}
	recvs := map[key][]Ref{}
	for _, r := range j.Present() {
		for i := range r.Events {
			e := &r.Events[i]
			switch e.Kind {
			case trace.SendEvent:
				k := key{e.Comm, r.Rank, int(e.Peer), e.Tag}
				sends[k] = append(sends[k], Ref{r.Rank, i})
			case trace.RecvEvent:
				k := key{e.Comm, int(e.Peer), r.Rank, e.Tag}
				recvs[k] = append(recvs[k], Ref{r.Rank, i})
			}
		}
	}
	var ms []Message
	for k, ss := range sends {
		rs := recvs[k]
		for i := 0; i < len(ss) && i < len(rs); i++ {
			ms = append(ms, Message{ss[i], rs[i]})
		}
	}
	sort.Slice(ms, func(a, b int) bool {
		ea, eb := j.Event(ms[a].Send), j.Event(ms[b].Send)
		if ea.Start != eb.Start {
			return ea.Start < eb.Start
		}
		return ms[a].Send.Rank < ms[b].Send.Rank
	})
	return ms
}

// Instance is one collective call: the same call (the Seq-th on Comm) on
// each member that recorded it. Calls on communicators that share an id
// but no rank (the halves of a split) are told apart by their members.
type Instance struct {
	Comm    uint32
	Seq     uint64
	Op      uint32 // the operation's string id
	Members []int  // the communicator's world ranks, when known
	Calls   []Ref  // the members' events, in rank order
}

// Complete reports whether every member's call is in the trace.
func (in *Instance) Complete() bool { return len(in.Members) > 0 && len(in.Calls) == len(in.Members) }

// Collectives groups the collective calls of every rank into instances,
// in the order of their first entry.
func (j *Job) Collectives() []Instance {
	type key struct {
		comm   uint32
		leader int // the communicator's first member, as the rank knows it
		seq    uint64
	}
	at := map[key]int{}
	var ins []Instance
	for _, r := range j.Present() {
		for i := range r.Events {
			e := &r.Events[i]
			if e.Kind != trace.CollectiveEvent {
				continue
			}
			members := r.Comms[e.Comm]
			leader := -1
			if len(members) > 0 {
				leader = slices.Min(members)
			}
			k := key{e.Comm, leader, e.Seq}
			n, ok := at[k]
			if !ok {
				n = len(ins)
				at[k] = n
				ins = append(ins, Instance{Comm: e.Comm, Seq: e.Seq, Op: e.Name, Members: members})
			}
			ins[n].Calls = append(ins[n].Calls, Ref{r.Rank, i})
		}
	}
	first := func(in *Instance) int64 {
		t := j.Event(in.Calls[0]).Start
		for _, c := range in.Calls[1:] {
			t = min(t, j.Event(c).Start)
		}
		return t
	}
	sort.SliceStable(ins, func(a, b int) bool { return first(&ins[a]) < first(&ins[b]) })
	return ins
}
