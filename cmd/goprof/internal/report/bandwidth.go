package report

import (
	"sort"

	"github.com/gorun-hpc/gorun/cmd/goprof/internal/job"
)

// busFactor is what nccl-tests multiplies a collective's algorithm
// bandwidth by to get its bus bandwidth on p ranks: the share of the
// buffer each link must carry, so that one number compares across rank
// counts and against the hardware's.
func busFactor(op string, p int) float64 {
	n := float64(p)
	switch op {
	case "allreduce":
		return 2 * (n - 1) / n
	case "allgather", "reducescatter", "alltoall", "gather", "scatter":
		return (n - 1) / n
	}
	return 1
}

// bandwidth groups the collective calls by operation, size and algorithm,
// and times each call from its last member's entry to its last exit: the
// collective's own time, without the wait for late members. A call that
// lacks a member whose trace is missing is timed by the mean of the calls
// recorded; one that lacks a member left out (its trace is cut short) is
// left out: the member's time is not missing but unknown.
func (r *Report) bandwidth(j *job.Job, colls []job.Instance, left map[int]bool) {
	type key struct {
		op, algo string
		p        int
		bytes    int64
	}
	type acc struct {
		calls     int
		time      int64
		pred      int64
		predCalls int
	}
	by := map[key]*acc{}
	for _, in := range colls {
		e0 := j.Event(in.Calls[0])
		if e0.Bytes == 0 {
			continue
		}
		p := len(in.Members)
		var t int64
		if in.Complete() {
			lastIn, lastOut := int64(0), int64(0)
			for _, c := range in.Calls {
				e := j.Event(c)
				lastIn, lastOut = max(lastIn, e.Start), max(lastOut, e.End)
			}
			t = lastOut - lastIn
		} else {
			if lacksLeftOut(j, &in, left) {
				continue
			}
			if p == 0 {
				p = len(in.Calls)
			}
			for _, c := range in.Calls {
				t += j.Event(c).Dur()
			}
			t /= int64(len(in.Calls))
		}
		if p < 2 || t <= 0 {
			continue
		}
		k := key{j.Str(e0.Name), j.Str(e0.Algo), p, e0.Bytes}
		a := by[k]
		if a == nil {
			a = &acc{}
			by[k] = a
		}
		a.calls++
		a.time += t
		if e0.Predicted > 0 {
			a.pred += e0.Predicted
			a.predCalls++
		}
	}
	for k, a := range by {
		s := BandwidthStat{Op: k.op, Algo: k.algo, Ranks: k.p, Bytes: k.bytes, Calls: a.calls, Time: a.time / int64(a.calls)}
		s.AlgBW = float64(k.bytes) / float64(s.Time) // bytes per ns = GB/s
		s.BusBW = s.AlgBW * busFactor(k.op, k.p)
		if a.predCalls > 0 {
			s.Predicted = a.pred / int64(a.predCalls)
			s.ModelBW = float64(k.bytes) / float64(s.Predicted) * busFactor(k.op, k.p)
		}
		r.Bandwidth = append(r.Bandwidth, s)
	}
	sort.Slice(r.Bandwidth, func(a, b int) bool {
		x, y := r.Bandwidth[a], r.Bandwidth[b]
		if x.Op != y.Op {
			return x.Op < y.Op
		}
		if x.Bytes != y.Bytes {
			return x.Bytes < y.Bytes
		}
		return x.Algo < y.Algo
	})
}

// lacksLeftOut reports whether a member of in that the report leaves out
// has no call in it.
func lacksLeftOut(j *job.Job, in *job.Instance, left map[int]bool) bool {
	if len(left) == 0 {
		return false
	}
	if len(in.Members) == 0 {
		return true // who should have called is unknown
	}
	called := map[int]bool{}
	for _, c := range in.Calls {
		called[c.Rank] = true
	}
	for _, m := range in.Members {
		if left[m] && !called[m] {
			return true
		}
	}
	return false
}
