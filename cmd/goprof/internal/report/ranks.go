package report

import (
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/gorun-hpc/gorun/cmd/goprof/internal/job"
	"github.com/gorun-hpc/gorun/spmd/trace"
)

func (r *Report) ranks(j *job.Job) {
	for _, x := range j.Present() {
		s := RankStat{Rank: x.Rank, Host: x.Host, Events: len(x.Events), Offset: x.Offset, RTT: x.RTT, Complete: x.Done}
		var blocked, async spans
		first, last := int64(math.MaxInt64), int64(0)
		for i := range x.Events {
			e := &x.Events[i]
			first, last = min(first, e.Start), max(last, e.End)
			switch {
			case blocking(e):
				blocked = append(blocked, span{e.Start, e.End})
			case e.Kind == trace.CollectiveEvent:
				async = append(async, span{e.Start, e.End})
			case e.Kind == trace.MemoryEvent:
				s.HeapPeak = max(s.HeapPeak, e.Bytes)
			}
		}
		if len(x.Events) > 0 {
			s.Wall = last - first
		}
		s.Comm = blocked.union().length()
		s.Async = async.union().length()
		s.App = s.Wall - s.Comm
		if s.Wall > 0 {
			s.CommShare = float64(s.Comm) / float64(s.Wall)
		}
		r.Ranks = append(r.Ranks, s)
	}
}

// OneHost reports whether the job's ranks, two or more, all ran on one
// host. Each rank's trace clock counts from its own start on the host's
// monotonic clock, so there a rank's clock offset to rank 0 is only how
// much later than rank 0 it started; across hosts it is that plus the
// hosts' clock difference.
func (r *Report) OneHost() bool {
	if len(r.Ranks) < 2 {
		return false
	}
	for _, s := range r.Ranks[1:] {
		if s.Host != r.Ranks[0].Host {
			return false
		}
	}
	return true
}

func (r *Report) ops(j *job.Job) {
	type key struct{ op, site string }
	by := map[key]*OpStat{}
	var all int64
	add := func(k key, e *trace.Event) {
		s := by[k]
		if s == nil {
			s = &OpStat{Op: k.op, Site: k.site}
			by[k] = s
		}
		d := e.Dur()
		s.Count++
		s.Total += d
		s.Max = max(s.Max, d)
		s.Bytes += e.Bytes
		s.Sizes = addSize(s.Sizes, e.Bytes)
	}
	for _, x := range j.Present() {
		for i := range x.Events {
			e := &x.Events[i]
			if !IsComm(e) {
				continue
			}
			op := OpName(j, e)
			add(key{op, ""}, e)
			site := j.Str(e.Site)
			if site == "" {
				site = "?"
			}
			add(key{op, site}, e)
			if blocking(e) {
				all += e.Dur()
			}
		}
	}
	for k, s := range by {
		s.Mean = s.Total / int64(s.Count)
		if all > 0 && !strings.HasPrefix(k.op, "i") {
			s.Share = float64(s.Total) / float64(all)
		}
		if k.site == "" {
			r.Ops = append(r.Ops, *s)
		} else {
			r.Sites = append(r.Sites, *s)
		}
	}
	order := func(v []OpStat) {
		sort.Slice(v, func(a, b int) bool {
			if v[a].Total != v[b].Total {
				return v[a].Total > v[b].Total
			}
			if v[a].Op != v[b].Op {
				return v[a].Op < v[b].Op
			}
			return v[a].Site < v[b].Site
		})
	}
	order(r.Ops)
	order(r.Sites)
}

// addSize counts a call of n bytes in its power-of-two bucket.
func addSize(bs []Bucket, n int64) []Bucket {
	upto := int64(0)
	if n > 0 {
		upto = 1
		for upto < n {
			upto <<= 1
		}
	}
	i := sort.Search(len(bs), func(i int) bool { return bs[i].Upto >= upto })
	if i < len(bs) && bs[i].Upto == upto {
		bs[i].Count++
		return bs
	}
	return slices.Insert(bs, i, Bucket{Upto: upto, Count: 1})
}

// regions sums the regions by name; their cv is over the ranks not left
// out.
func (r *Report) regions(j *job.Job, left map[int]bool) {
	by := map[string]*RegionStat{}
	perRank := map[string]map[int]int64{}
	for _, x := range j.Present() {
		for i := range x.Events {
			e := &x.Events[i]
			if e.Kind != trace.RegionEvent {
				continue
			}
			n := j.Str(e.Name)
			s := by[n]
			if s == nil {
				s = &RegionStat{Name: n}
				by[n] = s
				perRank[n] = map[int]int64{}
			}
			d := e.Dur()
			s.Count++
			s.Total += d
			s.Max = max(s.Max, d)
			perRank[n][x.Rank] += d
		}
	}
	for n, s := range by {
		s.Mean = s.Total / int64(s.Count)
		var v []float64
		for _, x := range j.Present() {
			if !left[x.Rank] {
				v = append(v, float64(perRank[n][x.Rank]))
			}
		}
		s.CV = cv(v)
		r.Regions = append(r.Regions, *s)
	}
	sort.Slice(r.Regions, func(a, b int) bool {
		if r.Regions[a].Total != r.Regions[b].Total {
			return r.Regions[a].Total > r.Regions[b].Total
		}
		return r.Regions[a].Name < r.Regions[b].Name
	})
}

// balance compares the ranks not left out.
func (r *Report) balance(left map[int]bool) {
	var app, cm []float64
	var maxWall int64
	im := &r.Imbalance
	for _, s := range r.Ranks {
		if left[s.Rank] {
			continue
		}
		app = append(app, float64(s.App))
		cm = append(cm, float64(s.Comm))
		if s.App > im.MaxApp || len(app) == 1 {
			im.MaxApp, im.MostLoaded = s.App, s.Rank
		}
		maxWall = max(maxWall, s.Wall)
	}
	if len(app) == 0 {
		return
	}
	im.AppCV, im.CommCV = cv(app), cv(cm)
	im.MeanApp = int64(mean(app))
	if im.MaxApp > 0 {
		r.POP.LoadBalance = float64(im.MeanApp) / float64(im.MaxApp)
	}
	if maxWall > 0 {
		r.POP.CommEfficiency = float64(im.MaxApp) / float64(maxWall)
	}
	r.POP.ParallelEfficiency = r.POP.LoadBalance * r.POP.CommEfficiency
}

func mean(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	var s float64
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}

// cv is the coefficient of variation (population standard deviation over
// mean); 0 for an empty or zero-mean set.
func cv(v []float64) float64 {
	m := mean(v)
	if m == 0 {
		return 0
	}
	var ss float64
	for _, x := range v {
		ss += (x - m) * (x - m)
	}
	return math.Sqrt(ss/float64(len(v))) / m
}
