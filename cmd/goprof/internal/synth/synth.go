// Package synth writes synthetic gorun --profile jobs, each rank's trace
// made with the real recorder from events given with their times: jobs
// with a known answer for goprof's tests, and big ones for its
// benchmarks.
package synth

import (
	"errors"
	"fmt"
	"time"

	"github.com/gorun-hpc/gorun/spmd/trace"
)

// Job is a synthetic job being written.
type Job struct {
	Dir   string
	Size  int
	ranks []*Rank
}

// Rank is one rank's trace being written. Its methods take times on the
// job's true clock; a rank with a clock offset records them on its own.
type Rank struct {
	rank int
	rec  *trace.Recorder
	skew int64 // this rank's clock is the true clock less skew
	seq  map[uint32]uint64
}

// Options shape a synthetic job.
type Options struct {
	Job string // the job id; default "synth"
	// Skew gives ranks clocks that run ahead of rank 0's by so much: the
	// trace records the offset, as Init's ping-pongs would measure it.
	Skew map[int]time.Duration
	// Program is the header's command line.
	Program string
	// Restart is which start of a restarted job this is (gorun
	// --max-restarts).
	Restart int
}

// New starts the trace files of a job of size ranks in dir, with world
// communicator 0 declared on every rank.
func New(dir string, size int, o Options) (*Job, error) {
	if o.Job == "" {
		o.Job = "synth"
	}
	j := &Job{Dir: dir, Size: size}
	for r := 0; r < size; r++ {
		skew := int64(o.Skew[r])
		rec, err := trace.New(dir, trace.Header{Rank: r, Size: size, Job: o.Job, Host: fmt.Sprintf("host%d", r/4), Program: o.Program, Restart: o.Restart})
		if err != nil {
			j.Close()
			return nil, err
		}
		members := make([]int, size)
		for i := range members {
			members[i] = i
		}
		rec.Comm(0, members)
		if r == 0 {
			rec.SetClock(0, 0)
		} else {
			rec.SetClock(time.Duration(-skew), 20*time.Microsecond)
		}
		j.ranks = append(j.ranks, &Rank{rank: r, rec: rec, skew: skew, seq: map[uint32]uint64{}})
	}
	return j, nil
}

// Rank returns rank r's writer.
func (j *Job) Rank(r int) *Rank { return j.ranks[r] }

// Close ends every trace file.
func (j *Job) Close() error {
	var errs []error
	for _, r := range j.ranks {
		errs = append(errs, r.rec.Close())
	}
	return errors.Join(errs...)
}

func (r *Rank) local(t time.Duration) int64 { return int64(t) + r.skew }

// Region records a region on the main track.
func (r *Rank) Region(name string, from, to time.Duration) { r.RegionOn("", name, from, to) }

// RegionOn records a region on a named track ("" for main).
func (r *Rank) RegionOn(track, name string, from, to time.Duration) {
	e := trace.Event{Kind: trace.RegionEvent, Start: r.local(from), End: r.local(to), Peer: -1}
	if track != "" {
		e.Track = r.rec.Intern(track)
	}
	r.rec.Record(e, name, "")
}

// Heap records a heap sample.
func (r *Rank) Heap(at time.Duration, bytes int64) {
	r.rec.Record(trace.Event{Kind: trace.MemoryEvent, Start: r.local(at), End: r.local(at), Peer: -1, Bytes: bytes}, "", "")
}

// Coll describes a collective call.
type Coll struct {
	Op, Algo    string
	Comm        uint32
	Bytes       int64
	Predicted   time.Duration
	Site        string
	NonBlocking bool   // recorded on the track "comm N async"
	Seq         uint64 // set by Collective: the rank's next on Comm
}

// Collective records a collective call; calls on one communicator are
// numbered in the order they are recorded, per rank.
func (r *Rank) Collective(c Coll, from, to time.Duration) {
	e := trace.Event{Kind: trace.CollectiveEvent, Start: r.local(from), End: r.local(to), Comm: c.Comm, Peer: -1,
		Bytes: c.Bytes, Seq: r.seq[c.Comm], Predicted: int64(c.Predicted)}
	r.seq[c.Comm]++
	if c.Site != "" {
		e.Site = r.rec.Intern(c.Site)
	}
	if c.NonBlocking {
		e.Flags = trace.NonBlocking
		e.Track = r.rec.Intern(fmt.Sprintf("comm %d async", c.Comm))
	}
	r.rec.Record(e, c.Op, c.Algo)
}

// Send records a blocking send to world rank peer.
func (r *Rank) Send(peer, tag int, bytes int64, from, to time.Duration) {
	r.p2p(trace.SendEvent, 0, peer, tag, bytes, from, to)
}

// Recv records a blocking receive from world rank peer.
func (r *Rank) Recv(peer, tag int, bytes int64, from, to time.Duration) {
	r.p2p(trace.RecvEvent, 0, peer, tag, bytes, from, to)
}

// Irecv records a non-blocking receive posted at from and seen complete
// at to, and its Wait, which blocked from wait to to.
func (r *Rank) Irecv(peer, tag int, bytes int64, from, wait, to time.Duration) {
	r.p2p(trace.RecvEvent, trace.NonBlocking, peer, tag, bytes, from, to)
	e := trace.Event{Kind: trace.WaitEvent, Flags: trace.NonBlocking, Start: r.local(wait), End: r.local(to), Peer: int32(peer), Tag: int32(tag), Bytes: bytes}
	r.rec.Record(e, "recv", "")
}

func (r *Rank) p2p(k trace.Kind, f trace.Flags, peer, tag int, bytes int64, from, to time.Duration) {
	r.rec.Record(trace.Event{Kind: k, Flags: f, Start: r.local(from), End: r.local(to), Peer: int32(peer), Tag: int32(tag), Bytes: bytes}, "", "")
}
