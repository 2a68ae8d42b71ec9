package main

import (
	"bytes"
	"context"
	"encoding/json"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/pprof/profile"

	"github.com/gorun-hpc/gorun/cmd/goprof/internal/report"
	"github.com/gorun-hpc/gorun/cmd/goprof/internal/synth"
)

// result is what a run of goprof left.
type result struct {
	stdout, stderr string
	code           int
}

// goprof runs the goprof app in this process, as main would.
func goprof(t *testing.T, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	app := newApp()
	app.Writer, app.ErrWriter = &out, &errb
	err := run(context.Background(), app, append([]string{"goprof"}, args...))
	code := exitCode(err, &errb)
	return result{out.String(), errb.String(), code}
}

// want fails unless r exited with code and its stderr holds every part.
func (r result) want(t *testing.T, code int, parts ...string) {
	t.Helper()
	if r.code != code {
		t.Errorf("exit %d, want %d\nstdout: %s\nstderr: %s", r.code, code, r.stdout, r.stderr)
	}
	for _, p := range parts {
		if !strings.Contains(r.stderr+r.stdout, p) {
			t.Errorf("output lacks %q\nstdout: %s\nstderr: %s", p, r.stdout, r.stderr)
		}
	}
}

var (
	buildOnce sync.Once
	binDir    string
	buildErr  error
)

// binaries builds gorun and the test job once.
func binaries(t *testing.T) (gorun, job string) {
	t.Helper()
	buildOnce.Do(func() {
		binDir, buildErr = os.MkdirTemp("", "goprof-test-")
		if buildErr != nil {
			return
		}
		for _, b := range [][2]string{{"gorun", "../gorun"}, {"job", "./testdata/job"}} {
			out, err := exec.Command("go", "build", "-o", filepath.Join(binDir, b[0]), b[1]).CombinedOutput()
			if err != nil {
				buildErr = &buildError{b[1], err, string(out)}
				return
			}
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return filepath.Join(binDir, "gorun"), filepath.Join(binDir, "job")
}

type buildError struct {
	pkg string
	err error
	out string
}

func (e *buildError) Error() string { return "building " + e.pkg + ": " + e.err.Error() + "\n" + e.out }

func TestMain(m *testing.M) {
	code := m.Run()
	for _, d := range []string{binDir, profRoot} {
		if d != "" {
			os.RemoveAll(d)
		}
	}
	os.Exit(code)
}

// profiled runs the test job under gorun --profile --profile-cpu on 4
// ranks, once, and returns its directory.
var (
	profOnce sync.Once
	profRoot string // the temporary directory, which TestMain removes
	profDir  string // the job's profile directory in it
	profErr  error
)

func profiledJob(t *testing.T) string {
	t.Helper()
	gorun, job := binaries(t)
	profOnce.Do(func() {
		profRoot, profErr = os.MkdirTemp("", "goprof-job-")
		if profErr != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		dir := filepath.Join(profRoot, "prof")
		out, err := exec.CommandContext(ctx, gorun, "-np", "4", "--profile", dir, "--profile-cpu", job).CombinedOutput()
		if err != nil {
			profErr = &buildError{"the profiled job", err, string(out)}
		}
		profDir = dir
	})
	if profErr != nil {
		t.Fatal(profErr)
	}
	return profDir
}

// TestProfiledJob profiles a real 4-rank job and runs every command on
// it: the report finds the job's planted late sender (rank 1 sends rank 2
// its message 50 ms late) and its training steps; every output opens
// with what reads it.
func TestProfiledJob(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs a 4-rank job")
	}
	dir := profiledJob(t)
	text := goprof(t, "report", dir)
	text.want(t, 0, "late sender", "rank 2 waited", "for rank 1", "Training steps", "allreduce")

	js := goprof(t, "report", "--json", dir)
	js.want(t, 0)
	var r report.Report
	if err := json.Unmarshal([]byte(js.stdout), &r); err != nil {
		t.Fatalf("report --json: %v", err)
	}
	if r.Job.Size != 4 || len(r.Job.Ranks) != 4 || len(r.Job.Missing) != 0 || len(r.Job.Problems) != 0 {
		t.Errorf("job %+v", r.Job)
	}
	if len(r.LateSender.Pairs) == 0 || r.LateSender.Pairs[0].Sender != 1 || r.LateSender.Pairs[0].Receiver != 2 ||
		r.LateSender.Pairs[0].Total < int64(30*time.Millisecond) {
		t.Errorf("late senders %+v, want rank 1 -> 2, about 50ms", r.LateSender)
	}
	if r.Steps == nil || r.Steps.Steps != 4 || r.Steps.Warmup != 1 || r.Steps.Compute <= 0 {
		t.Errorf("steps %+v, want 4 with computation after 1 of warm-up", r.Steps)
	}
	var site bool
	for _, s := range r.Sites {
		site = site || strings.Contains(s.Site, "job/main.go:")
	}
	if !site {
		t.Errorf("no call site in the job's main.go: %+v", r.Sites)
	}
	for _, x := range r.Ranks {
		if x.Rank != 0 && x.RTT <= 0 {
			t.Errorf("rank %d has no clock round trip", x.Rank)
		}
		if x.HeapPeak <= 0 {
			t.Errorf("rank %d has no heap samples", x.Rank)
		}
	}

	out := t.TempDir()
	tl := filepath.Join(out, "trace.json")
	goprof(t, "timeline", dir, "-o", tl).want(t, 0)
	checkTimeline(t, tl, 4)

	svg := filepath.Join(out, "timeline.svg")
	goprof(t, "svg", "--width", "1000", dir, "-o", svg).want(t, 0)
	checkXML(t, svg)

	page := filepath.Join(out, "report.html")
	goprof(t, "html", dir, "-o", page).want(t, 0)
	b, err := os.ReadFile(page)
	if err != nil || !bytes.Contains(b, []byte(`id="timeline"`)) {
		t.Errorf("report.html: %v, timeline svg present: %v", err, bytes.Contains(b, []byte(`id="timeline"`)))
	}
	screenshot(t, page)

	pb := filepath.Join(out, "comm.pb.gz")
	goprof(t, "pprof", dir, "-o", pb).want(t, 0)
	p := readProfile(t, pb)
	if len(p.Sample) == 0 || len(p.SampleType) != 3 || p.SampleType[1].Unit != "nanoseconds" {
		t.Errorf("pprof: %d samples, types %v", len(p.Sample), p.SampleType)
	}
	for r := 0; r < 4; r++ {
		readProfile(t, filepath.Join(dir, "rank."+strconv.Itoa(r)+".cpu.pprof"))
	}

	goprof(t, "diff", dir, dir).want(t, 0, "Operations", "allreduce")
	goprof(t, "report", "--rank", "1-2", "--from", "1ms", dir).want(t, 0, "ranks:    1-2")
}

func readProfile(t *testing.T, path string) *profile.Profile {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p, err := profile.Parse(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return p
}

// checkTimeline checks what Perfetto needs of a trace: a named process per
// rank, complete events with times, flow arrows in pairs.
func checkTimeline(t *testing.T, path string, ranks int) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		TraceEvents []struct {
			Name string          `json:"name"`
			Ph   string          `json:"ph"`
			Pid  int             `json:"pid"`
			Tid  int             `json:"tid"`
			Ts   float64         `json:"ts"`
			Dur  float64         `json:"dur"`
			ID   json.RawMessage `json:"id"`
			Args map[string]any  `json:"args"`
		} `json:"traceEvents"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	procs := map[int]bool{}
	flows := map[string]int{}
	var slices int
	for _, e := range doc.TraceEvents {
		switch e.Ph {
		case "M":
			if e.Name == "process_name" {
				procs[e.Pid] = true
			}
		case "X":
			slices++
		case "s":
			flows[string(e.ID)]++
		case "f":
			flows[string(e.ID)] += 100
		}
	}
	if len(procs) != ranks {
		t.Errorf("%d named processes, want %d", len(procs), ranks)
	}
	if slices == 0 {
		t.Error("no complete events")
	}
	if len(flows) == 0 {
		t.Error("no flow arrows")
	}
	for id, n := range flows {
		if n != 101 {
			t.Errorf("flow %s: %d starts and %d ends", id, n%100, n/100)
		}
	}
}

func checkXML(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(bytes.TrimSpace(b), []byte("<")) || !bytes.Contains(b, []byte("<svg")) {
		t.Errorf("%s is not an SVG", path)
	}
}

// TestBadInput: damaged, foreign and missing files are reported by name
// and the rest is used; no trace at all, or a mistaken command line, is an
// error that says what to do.
func TestBadInput(t *testing.T) {
	write := func(t *testing.T, job string) string {
		dir := t.TempDir()
		j, err := synth.New(dir, 4, synth.Options{Job: job})
		if err != nil {
			t.Fatal(err)
		}
		j.Training(2000)
		if err := j.Close(); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	t.Run("truncated", func(t *testing.T) {
		dir := write(t, "a")
		path := filepath.Join(dir, "rank.3.trace")
		b, _ := os.ReadFile(path)
		os.WriteFile(path, b[:len(b)/2], 0o644)
		goprof(t, "report", dir).want(t, 0, "rank.3.trace", "end record", "its last events are missing")
		goprof(t, "svg", dir, "-o", filepath.Join(t.TempDir(), "x.svg")).want(t, 0, "warning", "rank.3.trace")
	})
	t.Run("corrupt", func(t *testing.T) {
		dir := write(t, "a")
		path := filepath.Join(dir, "rank.1.trace")
		b, _ := os.ReadFile(path)
		for i := len(b) / 2; i < len(b)/2+64; i++ {
			b[i] = 0xff
		}
		os.WriteFile(path, b, 0o644)
		goprof(t, "report", dir).want(t, 0, "rank.1.trace", "corrupt trace: record at byte", "before the damage")
	})
	t.Run("missing rank", func(t *testing.T) {
		dir := write(t, "a")
		os.Remove(filepath.Join(dir, "rank.2.trace"))
		r := goprof(t, "report", "--json", dir)
		r.want(t, 0)
		var rep report.Report
		if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
			t.Fatal(err)
		}
		if len(rep.Job.Missing) != 1 || rep.Job.Missing[0] != 2 {
			t.Errorf("missing %v, want [2]", rep.Job.Missing)
		}
		goprof(t, "report", dir).want(t, 0, "no trace of rank 2 (of 4)")
	})
	t.Run("mixed jobs", func(t *testing.T) {
		other := write(t, "b")
		dir := write(t, "a")
		b, _ := os.ReadFile(filepath.Join(other, "rank.1.trace"))
		os.WriteFile(filepath.Join(dir, "rank.1.trace"), b, 0o644)
		goprof(t, "report", dir).want(t, 0, `holds the traces of 2 jobs: this is the newest, job "a" of 4 ranks`, `left out, 1 file of job "b" of 4 ranks`, "no trace of rank 1")
	})
	t.Run("not a trace", func(t *testing.T) {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, "rank.0.trace"), []byte("{\"version\":1}\n"), 0o644)
		goprof(t, "report", dir).want(t, 1, "rank.0.trace", "a version 1 trace")
		os.WriteFile(filepath.Join(dir, "rank.0.trace"), []byte("hello"), 0o644)
		goprof(t, "report", dir).want(t, 1, "rank.0.trace", "not a gorun trace file")
	})
	t.Run("empty file", func(t *testing.T) {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, "rank.0.trace"), nil, 0o644)
		goprof(t, "report", dir).want(t, 1, "rank.0.trace: empty trace file (0 bytes)")
		dir = write(t, "a")
		os.WriteFile(filepath.Join(dir, "rank.2.trace"), nil, 0o644)
		goprof(t, "report", dir).want(t, 0, "rank.2.trace: empty trace file (0 bytes)", "no trace of rank 2 (of 4)")
	})
	t.Run("directory", func(t *testing.T) {
		dir := t.TempDir()
		os.Mkdir(filepath.Join(dir, "rank.0.trace"), 0o755)
		goprof(t, "report", dir).want(t, 1, "no trace files that could be read", "rank.0.trace: a directory, not a trace file: left out")
	})
	t.Run("empty", func(t *testing.T) {
		dir := t.TempDir()
		goprof(t, "report", dir).want(t, 1, "no trace files", "gorun --profile")
		goprof(t, "report", filepath.Join(dir, "nope")).want(t, 1, "nope: no such directory")
	})
	t.Run("command line", func(t *testing.T) {
		dir := write(t, "a")
		goprof(t).want(t, 2, "which command?")
		goprof(t, "reprot", dir).want(t, 2, `unknown command "reprot": did you mean report?`)
		goprof(t, "lint", dir).want(t, 2, `unknown command "lint": goprof report DIR`)
		goprof(t, dir).want(t, 2, dir+" is a directory, not a command: goprof report "+dir)
		goprof(t, "report").want(t, 2, "needs one directory")
		goprof(t, "report", "--rank", "x", dir).want(t, 2, "--rank")
		goprof(t, "report", "--rank", "9", dir).want(t, 2, "ranks 0 to 3")
		goprof(t, "report", "--from", "2s", "--to", "1s", dir).want(t, 2, "--to must come after --from")
		goprof(t, "report", "--from", "1.5", dir).want(t, 2, "--from 1.5: want a duration with a unit, e.g. 1.5s")
		goprof(t, "svg", "--to", "20", dir).want(t, 2, "--to 20: want a duration with a unit")
		goprof(t, "report", "--from", "1h", dir).want(t, 2, "--from 1h is past the trace's end at ")
		goprof(t, "report", "--help").want(t, 0, "(default: its end)")
		goprof(t, "report", "--nope", dir).want(t, 2, "nope")
		goprof(t, "diff", dir).want(t, 2, "two directories")
		goprof(t, "svg", "--width", "10", dir).want(t, 2, "--width")
		goprof(t, "svg", dir, "-o", filepath.Join(dir, "no", "such", "x.svg")).want(t, 1, "--output")
	})
}

// TestDamagedStrings: a trace's strings are bytes from a file that may be
// damaged; the reports stay valid UTF-8 whatever they hold: a region name
// that is not UTF-8, and 300 copies of a trace with bytes overwritten at
// random (seeded: the same every run).
func TestDamagedStrings(t *testing.T) {
	write := func(t *testing.T, region string) string {
		dir := t.TempDir()
		j, err := synth.New(dir, 2, synth.Options{})
		if err != nil {
			t.Fatal(err)
		}
		j.Training(200)
		if region != "" {
			j.Rank(0).Region(region, 0, 1000)
		}
		if err := j.Close(); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	dir := write(t, "back\xffward")
	check := func(t *testing.T, what, dir string) {
		t.Helper()
		for _, args := range [][]string{{"report"}, {"report", "--json"}, {"html", "-o", filepath.Join(t.TempDir(), "x.html")}} {
			r := goprof(t, append(args, dir)...)
			out := r.stdout + r.stderr
			if args[0] == "html" {
				b, _ := os.ReadFile(args[2])
				out += string(b)
			}
			if !utf8.ValidString(out) {
				t.Errorf("%s: goprof %s printed invalid UTF-8:\n%q", what, args[0], out)
			}
		}
	}
	check(t, "a region named \"back\\xffward\"", dir)
	if r := goprof(t, "report", dir); !strings.Contains(r.stdout, "back\uFFFDward") {
		t.Errorf("the report does not show the region as back\uFFFDward:\n%s", r.stdout)
	}

	dir = write(t, "")
	b0, _ := os.ReadFile(filepath.Join(dir, "rank.0.trace"))
	b1, _ := os.ReadFile(filepath.Join(dir, "rank.1.trace"))
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 300 {
		d := t.TempDir()
		c := slices.Clone(b1)
		for range 8 {
			c[rng.IntN(len(c))] = byte(rng.IntN(256))
		}
		os.WriteFile(filepath.Join(d, "rank.0.trace"), b0, 0o644)
		os.WriteFile(filepath.Join(d, "rank.1.trace"), c, 0o644)
		r := goprof(t, "report", d)
		if !utf8.ValidString(r.stdout + r.stderr) {
			t.Errorf("damaged copy %d: the report is not valid UTF-8:\n%q", i, r.stdout+r.stderr)
		}
	}
}
