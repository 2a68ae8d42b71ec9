package job

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gorun-hpc/gorun/spmd/trace"
)

// Rank is one rank's trace, aligned.
type Rank struct {
	Rank   int
	Host   string
	Path   string
	Pid    int
	Offset int64 // what was added to its times to put them on rank 0's clock
	RTT    int64 // the round trip the offset was measured over; 0 when none
	Done   bool  // its file ends with the end record
	// Comms are the communicators this rank belongs to: id -> the world
	// ranks of their members. Ids are unique only among communicators
	// that share a rank: two halves of a split may have the same one.
	Comms map[uint32][]int
	// Events in start order, times on the job's clock (ns since Start),
	// string ids into Job.Strings.
	Events []trace.Event
}

// Job is one job's traces, aligned.
type Job struct {
	Dir     string
	ID      string // GORUN_JOB_ID
	Program string
	Size    int
	Restart int // which start of a job gorun restarted (--max-restarts) this is: 0, 1, ...
	// Earlier are the directories, start.K under Dir, that hold the
	// traces of the earlier starts of a restarted job, in start order.
	Earlier []string
	Ranks   []*Rank // by rank; nil for a rank whose trace is missing
	Missing []int   // ranks without a usable trace file
	// Problems says what is wrong with the directory's files, one line
	// each, naming the file: what was left out or may be incomplete.
	Problems []string
	Strings  []string
	// Times are on rank 0's clock, shifted so that the job's first event
	// starts at 0; Duration is from there to the latest end.
	Duration int64

	strs map[string]uint32
}

// Str returns the job's string id.
func (j *Job) Str(id uint32) string {
	if int(id) < len(j.Strings) {
		return j.Strings[id]
	}
	return ""
}

// Lookup returns the id of s in the job's strings, and whether the job
// has it.
func (j *Job) Lookup(s string) (uint32, bool) {
	id, ok := j.strs[s]
	return id, ok
}

// Intern returns the id of s in the job's strings, adding it when new.
func (j *Job) Intern(s string) uint32 {
	if id, ok := j.strs[s]; ok {
		return id
	}
	id := uint32(len(j.Strings))
	j.Strings = append(j.Strings, s)
	j.strs[s] = id
	return id
}

// Present returns the ranks with a trace, in rank order.
func (j *Job) Present() []*Rank {
	var rs []*Rank
	for _, r := range j.Ranks {
		if r != nil {
			rs = append(rs, r)
		}
	}
	return rs
}

// ErrNoTraces is returned by Load for a directory without trace files.
var ErrNoTraces = errors.New("no trace files")

var traceName = regexp.MustCompile(`^rank\.(\d+)\.trace$`)

var startName = regexp.MustCompile(`^start\.(\d+)$`)

// Load reads every rank.N.trace file of dir. It fails only when no file
// could be used; damaged, foreign and missing files are listed in
// Job.Problems and the rest is loaded. Of the files of several jobs (the
// trace headers' job ids and sizes) it loads the newest job's, the one
// whose files started last, and one line of Problems names the others.
func Load(dir string) (*Job, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var files []loaded
	j := &Job{Dir: dir, strs: map[string]uint32{"": 0}, Strings: []string{""}}
	for _, e := range ents {
		m := traceName.FindStringSubmatch(e.Name())
		if m == nil {
			continue
		}
		n, _ := strconv.Atoi(m[1])
		path := filepath.Join(dir, e.Name())
		if e.IsDir() {
			j.Problems = append(j.Problems, fmt.Sprintf("%s: a directory, not a trace file: left out", path))
			continue
		}
		f, err := trace.ReadFile(path)
		switch {
		case f == nil:
			j.Problems = append(j.Problems, fmt.Sprintf("%s: %v: left out", path, err))
			continue
		case f.Header.Size == 0:
			j.Problems = append(j.Problems, fmt.Sprintf("%v: left out", err))
			continue
		case err != nil && errors.Is(err, trace.ErrTruncated):
			j.Problems = append(j.Problems, fmt.Sprintf("%v: its last events are missing", err))
		case err != nil:
			j.Problems = append(j.Problems, fmt.Sprintf("%v: the events before the damage are used", err))
		}
		if f.Header.Rank != n {
			j.Problems = append(j.Problems, fmt.Sprintf("%s: holds rank %d's trace, not rank %d's: left out", path, f.Header.Rank, n))
			continue
		}
		files = append(files, loaded{e.Name(), n, f})
	}
	if len(files) == 0 {
		if len(j.Problems) > 0 {
			return nil, fmt.Errorf("%s: %w that could be read:\n  %s", dir, ErrNoTraces, strings.Join(j.Problems, "\n  "))
		}
		return nil, fmt.Errorf("%s: %w (rank.N.trace): was the job run with gorun --profile %s?", dir, ErrNoTraces, dir)
	}
	// Files of several jobs (a directory reused by a later --profile
	// run): keep the newest job's, and say in one line what was left out.
	jobs := groupJobs(files)
	best := jobs[0]
	var kept []loaded
	for _, l := range files {
		if keyOf(l.f) == best.key {
			kept = append(kept, l)
		}
	}
	if len(jobs) > 1 {
		j.Problems = append(j.Problems, otherJobs(dir, jobs))
	}
	h := kept[0].f.Header
	j.ID, j.Size, j.Program, j.Restart = h.Job, h.Size, h.Program, h.Restart
	j.Earlier = earlier(dir, ents, j.Restart)
	j.Ranks = make([]*Rank, j.Size)
	for _, l := range kept {
		j.Ranks[l.rank] = j.add(filepath.Join(dir, l.name), l.f)
	}
	for r, x := range j.Ranks {
		if x == nil {
			j.Missing = append(j.Missing, r)
		}
	}
	if len(j.Missing) > 0 {
		j.Problems = append(j.Problems, fmt.Sprintf("no trace of rank %s (of %d): the results leave them out", Ranges(j.Missing), j.Size))
	}
	j.origin()
	return j, nil
}

// loaded is a trace file Load read.
type loaded struct {
	name string
	rank int
	f    *trace.File
}

// earlier returns the start.K directories among ents of the starts before
// start restart, by K: those of another run in the same directory are not
// this job's.
func earlier(dir string, ents []os.DirEntry, restart int) []string {
	type start struct {
		k    int
		name string
	}
	var ss []start
	for _, e := range ents {
		if m := startName.FindStringSubmatch(e.Name()); m != nil && e.IsDir() {
			if k, err := strconv.Atoi(m[1]); err == nil && k < restart {
				ss = append(ss, start{k, e.Name()})
			}
		}
	}
	sort.Slice(ss, func(a, b int) bool { return ss[a].k < ss[b].k })
	var dirs []string
	for _, s := range ss {
		dirs = append(dirs, filepath.Join(dir, s.name))
	}
	return dirs
}

// EarlierNote says where the traces of a restarted job's earlier starts
// are, or returns "".
func (j *Job) EarlierNote() string {
	if len(j.Earlier) == 0 {
		return ""
	}
	return fmt.Sprintf("gorun restarted this job (--max-restarts): these are the traces of its start %d; its earlier starts' are in %s (goprof report %s)", j.Restart,
		strings.Join(j.Earlier, ", "), j.Earlier[len(j.Earlier)-1])
}

// jobKey is what a trace file's job is known by: its id and size.
type jobKey struct {
	id   string
	size int
}

func keyOf(f *trace.File) jobKey { return jobKey{f.Header.Job, f.Header.Size} }

func (k jobKey) less(o jobKey) bool { return k.id < o.id || k.id == o.id && k.size < o.size }

// traces is the files of one job in a directory.
type traces struct {
	key   jobKey
	start time.Time // the earliest of its files' starts
	ranks []int
}

// groupJobs groups the loaded files by job, the newest first: the one
// that started last, then the one with more files, then the one rank 0's
// file belongs to.
func groupJobs(files []loaded) []*traces {
	byKey := map[jobKey]*traces{}
	var jobs []*traces
	for _, l := range files {
		k := keyOf(l.f)
		t := byKey[k]
		if t == nil {
			t = &traces{key: k, start: l.f.Header.Start}
			byKey[k] = t
			jobs = append(jobs, t)
		}
		if l.f.Header.Start.Before(t.start) {
			t.start = l.f.Header.Start
		}
		t.ranks = append(t.ranks, l.rank)
	}
	sort.SliceStable(jobs, func(a, b int) bool {
		x, y := jobs[a], jobs[b]
		switch {
		case !x.start.Equal(y.start):
			return x.start.After(y.start)
		case len(x.ranks) != len(y.ranks):
			return len(x.ranks) > len(y.ranks)
		case slices.Contains(x.ranks, 0) != slices.Contains(y.ranks, 0):
			return slices.Contains(x.ranks, 0)
		}
		return x.key.less(y.key)
	})
	return jobs
}

// otherJobs is the line that says which of dir's jobs, newest first, is
// reported and which files of the others are left out.
func otherJobs(dir string, jobs []*traces) string {
	var n int
	var others []string
	for _, t := range jobs[1:] {
		n += len(t.ranks)
		others = append(others, fmt.Sprintf("%s (rank %s)", t, Ranges(t.ranks)))
	}
	files := "files"
	if n == 1 {
		files = "file"
	}
	return fmt.Sprintf("%s holds the traces of %d jobs: this is the newest, %s; left out, %d %s of %s: move a job's rank.N.trace files to a directory of their own to report it",
		dir, len(jobs), jobs[0], n, files, strings.Join(others, "; "))
}

// String says `job "ID" of N ranks, started 2006-01-02 15:04:05`.
func (t *traces) String() string {
	ranks := "ranks"
	if t.key.size == 1 {
		ranks = "rank"
	}
	return fmt.Sprintf("job %q of %d %s, started %s", t.key.id, t.key.size, ranks, t.start.Local().Format(time.DateTime))
}

// add remaps f's strings to the job's, puts its times on rank 0's clock
// and sorts its events by start.
func (j *Job) add(path string, f *trace.File) *Rank {
	r := &Rank{Rank: f.Header.Rank, Host: f.Header.Host, Path: path, Pid: f.Header.Pid, Offset: f.Offset, RTT: f.RTT, Done: f.Done, Comms: f.Comms}
	if f.RTT == 0 && f.Header.Rank != 0 && f.Header.Size > 1 {
		j.Problems = append(j.Problems, fmt.Sprintf("%s: no clock offset to rank 0 was recorded: its times are not aligned with the other ranks'", path))
	}
	ids := make([]uint32, len(f.Strings))
	for i, s := range f.Strings {
		ids[i] = j.Intern(strings.ToValidUTF8(s, "\uFFFD")) // a damaged file's bytes must not reach the reports
	}
	r.Events = f.Events
	for i := range r.Events {
		e := &r.Events[i]
		e.Start += f.Offset
		e.End += f.Offset
		e.Name, e.Algo, e.Site, e.Track = ids[e.Name], ids[e.Algo], ids[e.Site], ids[e.Track]
	}
	sort.SliceStable(r.Events, func(a, b int) bool { return r.Events[a].Start < r.Events[b].Start })
	return r
}

// origin shifts every time so that the job's first event starts at 0,
// and sets Duration.
func (j *Job) origin() {
	first, last := j.span()
	for _, r := range j.Present() {
		for i := range r.Events {
			r.Events[i].Start -= first
			r.Events[i].End -= first
		}
	}
	j.Duration = last - first
}

// span returns the first start and the last end of the present ranks'
// events.
func (j *Job) span() (first, last int64) {
	seen := false
	for _, r := range j.Present() {
		for i := range r.Events {
			e := &r.Events[i]
			if !seen || e.Start < first {
				first = e.Start
			}
			if !seen || e.End > last {
				last = e.End
			}
			seen = true
		}
	}
	return first, last
}

// Ranges writes ranks as "0,2-4".
func Ranges(rs []int) string {
	rs = slices.Clone(rs)
	slices.Sort(rs)
	s := ""
	for i := 0; i < len(rs); {
		k := i
		for k+1 < len(rs) && rs[k+1] == rs[k]+1 {
			k++
		}
		if s != "" {
			s += ","
		}
		if k > i {
			s += fmt.Sprintf("%d-%d", rs[i], rs[k])
		} else {
			s += strconv.Itoa(rs[i])
		}
		i = k + 1
	}
	return s
}
