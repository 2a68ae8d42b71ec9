package report

import (
	"sort"

	"github.com/gorun-hpc/gorun/cmd/goprof/internal/job"
	"github.com/gorun-hpc/gorun/spmd/trace"
)

// lateSenders finds the receives that waited for their message to be sent
// (Scalasca's late sender): from the moment the rank began to wait (the
// blocking receive's post, or the wait for a non-blocking one) to the
// send's post, or the end of the wait when that came first.
func (r *Report) lateSenders(j *job.Job) {
	type waitKey struct {
		rank      int
		end       int64
		comm      uint32
		peer, tag int32
	}
	waits := map[waitKey]*trace.Event{}
	recv, hasRecv := j.Lookup("recv")
	for _, x := range j.Present() {
		for i := range x.Events {
			e := &x.Events[i]
			if e.Kind == trace.WaitEvent && hasRecv && e.Name == recv {
				waits[waitKey{x.Rank, e.End, e.Comm, e.Peer, e.Tag}] = e
			}
		}
	}
	type pair struct{ s, r int }
	by := map[pair]*LatePair{}
	for _, m := range j.Messages() {
		s, rv := j.Event(m.Send), j.Event(m.Recv)
		from, to := rv.Start, rv.End
		if rv.Flags&trace.NonBlocking != 0 {
			w := waits[waitKey{m.Recv.Rank, rv.End, rv.Comm, rv.Peer, rv.Tag}]
			if w == nil {
				continue // it arrived before anyone waited for it
			}
			from, to = w.Start, w.End
		}
		if s.Start <= from {
			continue
		}
		lost := min(s.Start, to) - from
		if lost <= 0 {
			continue
		}
		p := pair{m.Send.Rank, m.Recv.Rank}
		lp := by[p]
		if lp == nil {
			lp = &LatePair{Sender: p.s, Receiver: p.r}
			by[p] = lp
		}
		lp.Count++
		lp.Total += lost
		lp.Max = max(lp.Max, lost)
		r.LateSender.Total += lost
		r.LateSender.Count++
	}
	for _, lp := range by {
		r.LateSender.Pairs = append(r.LateSender.Pairs, *lp)
	}
	sort.Slice(r.LateSender.Pairs, func(a, b int) bool {
		pa, pb := r.LateSender.Pairs[a], r.LateSender.Pairs[b]
		if pa.Total != pb.Total {
			return pa.Total > pb.Total
		}
		if pa.Sender != pb.Sender {
			return pa.Sender < pb.Sender
		}
		return pa.Receiver < pb.Receiver
	})
}

// collectiveWaits measures, for every collective call that all its
// members recorded, how long each waited for the last to enter, and who
// that was.
func (r *Report) collectiveWaits(j *job.Job, colls []job.Instance) {
	wait := map[int]int64{}
	type strag struct {
		last, in int
		delay    int64
	}
	st := map[int]*strag{}
	var worst []SlowEntry
	for _, in := range colls {
		if !in.Complete() || len(in.Calls) < 2 {
			continue
		}
		r.CollWait.Instances++
		first, last, lastRank := int64(0), int64(0), -1
		for k, c := range in.Calls {
			e := j.Event(c)
			if k == 0 || e.Start < first {
				first = e.Start
			}
			if k == 0 || e.Start > last || (e.Start == last && c.Rank < lastRank) {
				last, lastRank = e.Start, c.Rank
			}
		}
		for _, c := range in.Calls {
			e := j.Event(c)
			w := min(last, e.End) - e.Start
			if w > 0 {
				wait[c.Rank] += w
				r.CollWait.Total += w
			}
			if st[c.Rank] == nil {
				st[c.Rank] = &strag{}
			}
			st[c.Rank].in++
		}
		spread := last - first
		if spread <= 0 {
			continue
		}
		st[lastRank].last++
		st[lastRank].delay += spread
		worst = append(worst, SlowEntry{Op: j.Str(in.Op), Comm: in.Comm, Seq: in.Seq, Spread: spread, Last: lastRank, At: first})
	}
	for _, x := range j.Present() {
		r.CollWait.PerRank = append(r.CollWait.PerRank, RankWait{Rank: x.Rank, Wait: wait[x.Rank]})
	}
	sort.Slice(worst, func(a, b int) bool {
		if worst[a].Spread != worst[b].Spread {
			return worst[a].Spread > worst[b].Spread
		}
		return worst[a].At < worst[b].At
	})
	if len(worst) > 5 {
		worst = worst[:5]
	}
	r.CollWait.Worst = worst
	for rank, s := range st {
		if s.last == 0 {
			continue
		}
		r.Stragglers = append(r.Stragglers, Straggler{Rank: rank, Last: s.last, Share: float64(s.last) / float64(s.in), Delay: s.delay})
	}
	sort.Slice(r.Stragglers, func(a, b int) bool {
		sa, sb := r.Stragglers[a], r.Stragglers[b]
		if sa.Last != sb.Last {
			return sa.Last > sb.Last
		}
		return sa.Rank < sb.Rank
	})
}
