package job_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gorun-hpc/gorun/cmd/goprof/internal/job"
	"github.com/gorun-hpc/gorun/cmd/goprof/internal/synth"
	"github.com/gorun-hpc/gorun/spmd/trace"
)

const ms = time.Millisecond

func TestParseRanksAndRanges(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []int
		back string
	}{
		{"0", []int{0}, "0"},
		{"0,2-4", []int{0, 2, 3, 4}, "0,2-4"},
		{" 3 , 1-2", []int{3, 1, 2}, "1-3"},
	} {
		got, err := job.ParseRanks(tc.in)
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("ParseRanks(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
		if s := job.Ranges(got); s != tc.back {
			t.Errorf("Ranges(%v) = %q, want %q", got, s, tc.back)
		}
	}
	for _, bad := range []string{"", "x", "-1", "3-1", "1-", "1,,2"} {
		if _, err := job.ParseRanks(bad); err == nil {
			t.Errorf("ParseRanks(%q) accepted", bad)
		}
	}
}

// TestLoadAligns: times go on rank 0's clock and start at the job's first
// event; messages pair in order; a skewed rank lines up.
func TestLoadAligns(t *testing.T) {
	dir := t.TempDir()
	j, err := synth.New(dir, 2, synth.Options{Skew: map[int]time.Duration{1: time.Hour}})
	if err != nil {
		t.Fatal(err)
	}
	j.Rank(0).Send(1, 5, 8, 10*ms, 11*ms)
	j.Rank(0).Send(1, 5, 16, 20*ms, 21*ms)
	j.Rank(1).Recv(0, 5, 8, 5*ms, 11*ms)
	j.Rank(1).Recv(0, 5, 16, 15*ms, 21*ms)
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	jb, err := job.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(jb.Problems) != 0 {
		t.Errorf("problems %q", jb.Problems)
	}
	if jb.Duration != int64(16*ms) {
		t.Errorf("duration %v, want 16ms", time.Duration(jb.Duration))
	}
	if e := jb.Ranks[1].Events[0]; e.Start != 0 {
		t.Errorf("rank 1's first event starts at %v, want 0 (the job's first)", time.Duration(e.Start))
	}
	msgs := jb.Messages()
	if len(msgs) != 2 {
		t.Fatalf("%d messages, want 2", len(msgs))
	}
	for i, m := range msgs {
		s, r := jb.Event(m.Send), jb.Event(m.Recv)
		if s.Bytes != r.Bytes || s.Bytes != int64(8*(i+1)) {
			t.Errorf("message %d pairs a send of %d with a receive of %d", i, s.Bytes, r.Bytes)
		}
	}
	if err := jb.Narrow([]int{1}, int64(8*ms), 0); err != nil {
		t.Fatal(err)
	}
	if jb.Ranks[0] != nil || len(jb.Ranks[1].Events) != 1 || jb.Duration != int64(6*ms) {
		t.Errorf("narrowed to rank 1 from 8ms: rank 0 %v, rank 1 %d events, duration %v", jb.Ranks[0] != nil, len(jb.Ranks[1].Events), time.Duration(jb.Duration))
	}
	if err := jb.Narrow([]int{7}, 0, 0); err == nil {
		t.Error("Narrow to rank 7 of 2 accepted")
	}
}

// TestSplitComms: the two halves of a split may share a communicator id;
// their calls stay apart, each complete.
func TestSplitComms(t *testing.T) {
	dir := t.TempDir()
	for r := 0; r < 4; r++ {
		rec, err := trace.New(dir, trace.Header{Rank: r, Size: 4, Job: "s"})
		if err != nil {
			t.Fatal(err)
		}
		rec.SetClock(0, time.Microsecond)
		rec.Comm(0, []int{0, 1, 2, 3})
		half := []int{0, 1}
		if r >= 2 {
			half = []int{2, 3}
		}
		rec.Comm(2, half)
		rec.Record(trace.Event{Kind: trace.CollectiveEvent, Start: int64(ms), End: int64(2 * ms), Comm: 2, Peer: -1, Seq: 0, Bytes: 8}, "allreduce", "ring")
		if err := rec.Close(); err != nil {
			t.Fatal(err)
		}
	}
	jb, err := job.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	ins := jb.Collectives()
	if len(ins) != 2 {
		t.Fatalf("%d instances, want one per half", len(ins))
	}
	for _, in := range ins {
		if !in.Complete() || len(in.Calls) != 2 {
			t.Errorf("instance %+v: want both members of its half", in)
		}
	}
}

// TestLoadProblems: what is wrong with a directory's files is said by
// file, and the rest loads.
func TestLoadProblems(t *testing.T) {
	write := func(dir, id string, size int) {
		j, err := synth.New(dir, size, synth.Options{Job: id})
		if err != nil {
			t.Fatal(err)
		}
		for r := 0; r < size; r++ {
			j.Rank(r).Region("work", 0, ms)
		}
		if err := j.Close(); err != nil {
			t.Fatal(err)
		}
	}
	other := t.TempDir()
	write(other, "b", 3) // an older job
	dir := t.TempDir()
	write(dir, "a", 3)
	b, _ := os.ReadFile(filepath.Join(other, "rank.2.trace"))
	os.WriteFile(filepath.Join(dir, "rank.2.trace"), b, 0o644)
	os.WriteFile(filepath.Join(dir, "rank.9.trace"), []byte("GORUNTRC"), 0o644)
	os.Rename(filepath.Join(dir, "rank.1.trace"), filepath.Join(dir, "rank.5.trace"))
	jb, err := job.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	all := strings.Join(jb.Problems, "\n")
	for _, want := range []string{`holds the traces of 2 jobs: this is the newest, job "a" of 3 ranks, started `, `left out, 1 file of job "b" of 3 ranks, started `, "(rank 2)", "rank.9.trace", "rank.5.trace: holds rank 1's trace", "no trace of rank 1-2 (of 3)"} {
		if !strings.Contains(all, want) {
			t.Errorf("problems lack %q:\n%s", want, all)
		}
	}
	if !slices.Equal(jb.Missing, []int{1, 2}) {
		t.Errorf("missing %v, want [1 2]", jb.Missing)
	}
	if _, err := job.Load(t.TempDir()); err == nil || !strings.Contains(err.Error(), "gorun --profile") {
		t.Errorf("empty directory: %v", err)
	}
}

// TestLoadNewestJob: a directory that an earlier, larger job profiled into
// and a later one profiled into again holds both jobs' files; the newest
// job is loaded, whatever its number of files, and one line says which
// and what was left out.
func TestLoadNewestJob(t *testing.T) {
	dir := t.TempDir()
	for _, job := range []struct {
		id   string
		size int
	}{{"old", 4}, {"new", 1}} {
		j, err := synth.New(dir, job.size, synth.Options{Job: job.id})
		if err != nil {
			t.Fatal(err)
		}
		j.Rank(0).Region("work", 0, ms)
		if err := j.Close(); err != nil {
			t.Fatal(err)
		}
	}
	jb, err := job.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if jb.ID != "new" || jb.Size != 1 || len(jb.Present()) != 1 || len(jb.Missing) != 0 {
		t.Errorf("loaded job %q of %d ranks (%d present, missing %v), want the newest, \"new\", of 1", jb.ID, jb.Size, len(jb.Present()), jb.Missing)
	}
	want := dir + ` holds the traces of 2 jobs: this is the newest, job "new" of 1 rank, started `
	if len(jb.Problems) != 1 || !strings.HasPrefix(jb.Problems[0], want) ||
		!strings.Contains(jb.Problems[0], `left out, 3 files of job "old" of 4 ranks, started `) || !strings.Contains(jb.Problems[0], "(rank 1-3)") {
		t.Errorf("problems %q, want one line starting %q and saying what was left out", jb.Problems, want)
	}
}
