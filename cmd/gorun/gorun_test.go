package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gorun-hpc/gorun/spmd/launch/testhost"
)

var (
	update      = flag.Bool("update", false, "rewrite man/gorun.1")
	raceEnabled bool   // set by race_test.go
	gorunBin    string // built by TestMain
	goCache     string // go env GOCACHE, read by TestMain
)

// TestMain builds gorun once (with -race when the tests run with it).
func TestMain(m *testing.M) {
	flag.Parse()
	dir, err := os.MkdirTemp("", "gorun-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	gorunBin = filepath.Join(dir, "gorun")
	args := []string{"build", "-o", gorunBin}
	if raceEnabled {
		args = append(args, "-race")
	}
	out, err := exec.Command("go", append(args, ".")...).CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "building gorun: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	// gorunCmd moves XDG_CACHE_HOME, under which Go keeps its build cache
	// by default: the Go packages that gorun builds must keep this one, or
	// each builds the standard library again (a minute on two cores).
	if b, err := exec.Command("go", "env", "GOCACHE").Output(); err == nil {
		goCache = strings.TrimSpace(string(b))
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// result is what a run of gorun left.
type result struct {
	stdout, stderr string
	code           int
}

// gorun runs the built gorun with args and stdin, in a clean config home.
func gorun(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	cmd := gorunCmd(t, args...)
	cmd.Stdin = strings.NewReader(stdin)
	return runGorun(t, cmd)
}

// runGorun runs cmd, a gorunCmd, and returns what it left.
func runGorun(t *testing.T, cmd *exec.Cmd) result {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	r := result{stdout: stdout.String(), stderr: stderr.String()}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	case err != nil:
		t.Fatalf("gorun %v: %v", cmd.Args[1:], err)
	}
	return r
}

func gorunCmd(t *testing.T, args ...string) *exec.Cmd {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	cmd := exec.CommandContext(ctx, gorunBin, args...)
	// atexit_sleep_ms: a -race gorun would otherwise linger a second.
	// XDG_CACHE_HOME and an empty GORUN_TUNE_FILE: no decision table of
	// this machine's (gorun --tune) chooses for the tests.
	cmd.Env = append(os.Environ(), "XDG_CONFIG_HOME="+t.TempDir(), "XDG_CACHE_HOME="+t.TempDir(), "GORUN_TUNE_FILE=", "GORACE=atexit_sleep_ms=0")
	if goCache != "" {
		cmd.Env = append(cmd.Env, "GOCACHE="+goCache)
	}
	return cmd
}

func (r result) String() string {
	return fmt.Sprintf("status %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
}

// lines returns the sorted lines of s.
func lines(s string) []string {
	l := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
	sort.Strings(l)
	return l
}

func TestRanks(t *testing.T) {
	for _, n := range []int{1, 2, 4, 8} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			r := gorun(t, "", "-np", fmt.Sprint(n), "sh", "-c",
				`echo "rank $GORUN_RANK of $GORUN_SIZE local $GORUN_LOCAL_RANK/$GORUN_LOCAL_SIZE torch $RANK/$WORLD_SIZE"`)
			if r.code != 0 {
				t.Fatal(r)
			}
			var want []string
			for i := 0; i < n; i++ {
				want = append(want, fmt.Sprintf("rank %d of %d local %d/%d torch %d/%d", i, n, i, n, i, n))
			}
			sort.Strings(want)
			if got := lines(r.stdout); strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Errorf("got lines\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
			over := strings.Contains(r.stderr, "oversubscribed")
			if over != (n > runtime.NumCPU()) {
				t.Errorf("oversubscribed line = %v with %d ranks on %d cores:\n%s", over, n, runtime.NumCPU(), r.stderr)
			}
		})
	}
}

// TestContract checks the variables every rank gets and the secret on fd 3.
// A job on this machine has no gossip seed (its ranks do not gossip):
// GORUN_SEEDS is unset, which the "-" shows.
func TestContract(t *testing.T) {
	r := gorun(t, "", "-np", "2", "sh", "-c", `echo "$GORUN_RANK $GORUN_SECRET_FD $(cat <&3) $GORUN_JOB_ID`+
		` $GORUN_NODE_RANK/$GORUN_NODE_COUNT $GORUN_HOST_ID $MASTER_ADDR:$MASTER_PORT ${GORUN_SEEDS--} $LOCAL_WORLD_SIZE"`)
	if r.code != 0 {
		t.Fatal(r)
	}
	l := lines(r.stdout)
	if len(l) != 2 {
		t.Fatal(r)
	}
	f0, f1 := strings.Fields(l[0]), strings.Fields(l[1])
	if len(f0) != 9 || len(f1) != 9 {
		t.Fatalf("a variable is missing:\n%s", r.stdout)
	}
	if f0[1] != "3" || len(f0[2]) != 64 || f0[2] != f1[2] || f0[3] != f1[3] || f0[4] != "0/1" ||
		!strings.Contains(f0[5], ":") || !strings.HasPrefix(f0[6], "127.0.0.1:") || f0[7] != "-" || f0[8] != "2" {
		t.Errorf("unexpected contract values:\n%s", r.stdout)
	}
	ps, err := exec.Command("ps", "-eo", "args").Output()
	if err == nil && bytes.Contains(ps, []byte(f0[2])) {
		t.Error("the secret shows in ps output")
	}
}

func TestExitStatus(t *testing.T) {
	r := gorun(t, "", "-np", "3", "sh", "-c", `if [ "$GORUN_RANK" = 1 ]; then exit 3; fi; sleep 60`)
	if r.code != 3 {
		t.Fatalf("want status 3\n%v", r)
	}
	if !regexpMatch(`(?m)^gorun: rank 1 \(pid \d+ on \S+\) exited with status 3; stopping the other ranks$`, r.stderr) {
		t.Errorf("no failure line naming rank 1:\n%s", r.stderr)
	}
	if n := strings.Count(r.stderr, "exited with status"); n != 1 {
		t.Errorf("%d failure lines, want 1:\n%s", n, r.stderr)
	}
}

func TestKilledRank(t *testing.T) {
	r := gorun(t, "", "-np", "2", "sh", "-c", `if [ "$GORUN_RANK" = 1 ]; then kill -KILL $$; fi; sleep 60`)
	if r.code != 137 {
		t.Fatalf("want status 137\n%v", r)
	}
	if !regexpMatch(`(?m)^gorun: rank 1 \(pid \d+ on \S+\) was killed by signal 9 \(killed\); stopping the other ranks$`, r.stderr) {
		t.Errorf("no line naming the killed rank:\n%s", r.stderr)
	}
}

func TestTimeout(t *testing.T) {
	r := gorun(t, "", "-np", "2", "--timeout", "1s", "sleep", "60")
	if r.code != 124 || !strings.Contains(r.stderr, "timed out after 1s") {
		t.Fatalf("want status 124 and a timeout line\n%v", r)
	}
}

func TestExport(t *testing.T) {
	t.Setenv("GORUN_TEST_FROM_ENV", "inherited")
	r := gorun(t, "", "-np", "2", "-x", "A=1,2", "-x", "GORUN_TEST_FROM_ENV", "-x", "B=x=y",
		"sh", "-c", `echo "$A $GORUN_TEST_FROM_ENV $B"`)
	if r.code != 0 || r.stdout != "1,2 inherited x=y\n1,2 inherited x=y\n" {
		t.Fatal(r)
	}
}

func TestProgramFlags(t *testing.T) {
	// Flags after PROGRAM belong to it, even ones gorun has.
	r := gorun(t, "", "-np", "1", "echo", "-np", "5", "--verbose", "-x")
	if r.code != 0 || r.stdout != "-np 5 --verbose -x\n" {
		t.Fatal(r)
	}
}

func TestTagOutput(t *testing.T) {
	r := gorun(t, "", "-np", "2", "--tag-output", "sh", "-c", `echo out; echo err >&2; printf partial`)
	if r.code != 0 {
		t.Fatal(r)
	}
	if got := lines(r.stdout); strings.Join(got, "|") != "[0] out|[0] partial|[1] out|[1] partial" {
		t.Errorf("stdout: %q", r.stdout)
	}
	if !strings.Contains(r.stderr, "[0] err\n") || !strings.Contains(r.stderr, "[1] err\n") {
		t.Errorf("stderr: %q", r.stderr)
	}
}

func TestTimestampOutput(t *testing.T) {
	r := gorun(t, "", "-np", "1", "--timestamp-output", "--tag-output", "echo", "hi")
	if r.code != 0 || !regexpMatch(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3} \[0\] hi\n$`, r.stdout) {
		t.Fatal(r)
	}
}

func TestOutputDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	r := gorun(t, "", "-np", "2", "--output-dir", dir, "sh", "-c", `echo "out $GORUN_RANK"; echo "err $GORUN_RANK" >&2`)
	if r.code != 0 {
		t.Fatal(r)
	}
	for rank := 0; rank < 2; rank++ {
		for ext, want := range map[string]string{"out": "out", "err": "err"} {
			b, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("rank.%d.%s", rank, ext)))
			if err != nil || string(b) != fmt.Sprintf("%s %d\n", want, rank) {
				t.Errorf("rank.%d.%s = %q, %v", rank, ext, b, err)
			}
		}
	}
}

func TestStdin(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"rank 0 by default", nil, "0:hello|1:|2:"},
		{"rank 2", []string{"--stdin", "2"}, "0:|1:|2:hello"},
		{"all", []string{"--stdin", "all"}, "0:hello|1:hello|2:hello"},
		{"none", []string{"--stdin", "none"}, "0:|1:|2:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append(append([]string{"-np", "3"}, tc.args...), "sh", "-c", `echo "$GORUN_RANK:$(cat)"`)
			r := gorun(t, "hello\n", args...)
			if r.code != 0 || strings.Join(lines(r.stdout), "|") != tc.want {
				t.Fatalf("want %s\n%v", tc.want, r)
			}
		})
	}
}

// TestStdinUnreadable: gorun's standard input that cannot be read. A
// directory, which every read fails, is a usage error before any rank
// starts, unless --stdin none; a read that fails later is said in one
// line, the ranks see their input end there, and the job goes on. Both
// were dropped: the ranks saw an empty input and gorun exited 0.
func TestStdinUnreadable(t *testing.T) {
	dir := t.TempDir()
	open := func(t *testing.T, path string) *os.File {
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		return f
	}
	rank := []string{"sh", "-c", `echo "$GORUN_RANK:$(cat)"`}
	t.Run("directory", func(t *testing.T) {
		cmd := gorunCmd(t, append([]string{"-np", "2", "--stdin", "all"}, rank...)...)
		cmd.Stdin = open(t, dir)
		r := runGorun(t, cmd)
		want := "gorun: standard input is a directory (" + dir + "), which the ranks cannot read: redirect a file, or give --stdin none\n"
		if r.code != 2 || r.stderr != want || r.stdout != "" {
			t.Errorf("want status 2, no rank started and stderr %q\n%v", want, r)
		}
	})
	t.Run("directory, stdin none", func(t *testing.T) {
		cmd := gorunCmd(t, append([]string{"-np", "2", "--stdin", "none"}, rank...)...)
		cmd.Stdin = open(t, dir)
		if r := runGorun(t, cmd); r.code != 0 || strings.Join(lines(r.stdout), "|") != "0:|1:" {
			t.Errorf("want status 0 and the ranks' empty input\n%v", r)
		}
	})
	t.Run("read error", func(t *testing.T) {
		// The test's own memory at address 0: every read fails with EIO.
		cmd := gorunCmd(t, append([]string{"-np", "2", "--stdin", "all"}, rank...)...)
		cmd.Stdin = open(t, "/proc/self/mem")
		r := runGorun(t, cmd)
		line := "gorun: reading standard input: read /dev/stdin: input/output error; the ranks' standard input ends there, as at end of file\n"
		if r.code != 0 || strings.Count(r.stderr, line) != 1 || strings.Join(lines(r.stdout), "|") != "0:|1:" {
			t.Errorf("want status 0, the ranks' input ended and one line %q\n%v", line, r)
		}
	})
}

func TestWdir(t *testing.T) {
	dir, _ := filepath.EvalSymlinks(t.TempDir())
	r := gorun(t, "", "-np", "1", "--wdir", dir, "pwd")
	if r.code != 0 || r.stdout != dir+"\n" {
		t.Fatal(r)
	}
}

func TestProfileDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "prof")
	r := gorun(t, "", "-np", "1", "--profile", dir, "sh", "-c", `echo "$GORUN_PROFILE_DIR"`)
	if fi, err := os.Stat(dir); r.code != 0 || r.stdout != dir+"\n" || err != nil || !fi.IsDir() {
		t.Fatal(r)
	}
}

func TestDryRun(t *testing.T) {
	marker := filepath.Join(t.TempDir(), "started")
	r := gorun(t, "", "-np", "2", "--dry-run", "-x", "FOO=bar", "sh", "-c", "touch "+marker)
	if r.code != 0 {
		t.Fatal(r)
	}
	for _, want := range []string{"2 ranks of ", "rank 0: host ", "rank 1: host ", "local rank 1",
		"    GORUN_RANK=1\n", "    GORUN_SIZE=2\n", "    FOO=bar\n", "    MASTER_ADDR=127.0.0.1\n", "    GORUN_SECRET_FD=3\n",
		// What the start adds, as the real run would (the dry run left it out).
		fmt.Sprintf("    GORUN_HOST_CPUS=%d\n", runtime.NumCPU())} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("dry run output lacks %q:\n%s", want, r.stdout)
		}
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("--dry-run started the program")
	}
	// A Go program, which auto binds (sh it leaves unbound): what the
	// start adds for a bound rank.
	r = gorun(t, "", "-np", "2", "--dry-run", helloBin(t))
	if !regexpMatch(`(?m)^rank 0: host .*, local rank 0\n  binding: (core 0 \(cpu|none\n)`, r.stdout) {
		t.Errorf("dry run does not say how rank 0 is bound:\n%s", r.stdout)
	}
	if strings.Contains(r.stdout, "binding: core") && !strings.Contains(r.stdout, "    GOMAXPROCS=") {
		t.Errorf("dry run of bound ranks lacks their GOMAXPROCS:\n%s", r.stdout)
	}
	r = gorun(t, "", "-np", "2", "--dry-run", "--bind-to", "none", "-x", "GOMAXPROCS=3", "true")
	if !strings.Contains(r.stdout, "    GOMAXPROCS=3\n") || strings.Contains(r.stdout, "GOMAXPROCS=1") || !strings.Contains(r.stdout, "local rank 1\n  binding: none\n") {
		t.Errorf("dry run with --bind-to none and -x GOMAXPROCS=3:\n%s", r.stdout)
	}
}

// TestPortsTooFew: a --ports range with fewer ports than the job needs
// is refused before the start (the ranks each failed with "every port in
// 40000-40000 is in use"), and a rendezvous that cannot bind fails the
// start (gorun went on: ranks "will not find each other").
func TestPortsTooFew(t *testing.T) {
	for _, tc := range []struct{ ports, want string }{
		{"40000", "--ports 40000: 1 port, and host \\S+ needs 3: 1 for the rendezvous and 1 for each of its 2 ranks \\(its listener\\); widen it, as in --ports 40000-40002"},
		{"40000-40001", "--ports 40000-40001: 2 ports, and host \\S+ needs 3: "},
	} {
		r := gorun(t, "", "--ports", tc.ports, "-np", "2", "true")
		if r.code != 2 || !regexpMatch(`^gorun: `+tc.want, r.stderr) {
			t.Errorf("--ports %s: status %d, want 2, and stderr matching %q:\n%s", tc.ports, r.code, tc.want, r.stderr)
		}
	}
	// Hold three ports in a row, and ask for those.
	var held []net.Listener
	defer func() {
		for _, ln := range held {
			ln.Close()
		}
	}()
	low := 0
	for base := 42000; base < 60000 && low == 0; base += 97 {
		for _, ln := range held {
			ln.Close()
		}
		held = held[:0]
		for p := base; p < base+3; p++ {
			ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
			if err != nil {
				break
			}
			held = append(held, ln)
		}
		if len(held) == 3 {
			low = base
		}
	}
	if low == 0 {
		t.Skip("no three free ports in a row")
	}
	ports := fmt.Sprintf("%d-%d", low, low+2)
	r := gorun(t, "", "--ports", ports, "-np", "2", "true")
	want := "gorun: cannot open the job's rendezvous on 127.0.0.1 (--ports " + ports + "): every port in " + ports + " is in use"
	if r.code != 1 || !strings.HasPrefix(r.stderr, want) {
		t.Errorf("status %d, want 1, and stderr starting %q:\n%s", r.code, want, r.stderr)
	}
}

// TestConnectTimeout: a launch agent that never answers is given up at
// --connect-timeout (and connectMargin), killed at once, and named in the
// hint; gorun waited 5 s more, then KillGrace+5 s for it, and said "try
// ssh HOST true" of a --launch-agent.
func TestConnectTimeout(t *testing.T) {
	dir := t.TempDir()
	hang := filepath.Join(dir, "hangrsh")
	os.WriteFile(hang, []byte("#!/bin/sh\nexec sleep 60\n"), 0o755)
	t0 := time.Now()
	r := gorun(t, "", "-H", "127.0.0.2:1", "--launch-agent", hang, "--connect-timeout", "1s", "true")
	took := time.Since(t0)
	want := "gorun: host 127.0.0.2: no answer from its agent after 2s (--connect-timeout 1s); is it up? try " + hang + " 127.0.0.2 true\n"
	if r.code != 255 || r.stderr != want {
		t.Errorf("status %d, want 255, and stderr\n%q, want\n%q", r.code, r.stderr, want)
	}
	if took > 5*time.Second {
		t.Errorf("gorun took %v to give up on a 1s connect timeout", took)
	}
	// Two hosts are theirs, not its (it said "host 127.0.0.2, host
	// 127.0.0.3: no answer from its agent ...; is it up?").
	r = gorun(t, "", "-H", "127.0.0.2:1,127.0.0.3:1", "--launch-agent", hang, "--connect-timeout", "1s", "-np", "2", "true")
	want = "gorun: hosts 127.0.0.2, 127.0.0.3: no answer from their agents after 2s (--connect-timeout 1s); are they up? try " + hang + " 127.0.0.2 true\n"
	if r.code != 255 || r.stderr != want {
		t.Errorf("status %d, want 255, and stderr\n%q, want\n%q", r.code, r.stderr, want)
	}
}

// TestFlagsOverConfigHosts: a host list or address on the command line
// replaces the config file's, whichever key the file used; gorun said
// "-H and --hostfile both given" of a file's hostfile and a -H.
func TestFlagsOverConfigHosts(t *testing.T) {
	dir := t.TempDir()
	hostfile := filepath.Join(dir, "hosts")
	os.WriteFile(hostfile, []byte("localhost slots=2\n"), 0o644)
	for _, tc := range []struct {
		name, file string
		args       []string
		want       string // in stdout
	}{
		{"-H over hostfile", `hostfile = "/no/such/hosts"`, []string{"-H", "localhost:1"}, "1 rank of "},
		{"--hostfile over hosts", `hosts = "nosuchhost:4"`, []string{"--hostfile", hostfile}, "2 ranks of "},
		{"--iface over net", `net = "203.0.113.0/24"`, []string{"-np", "1", "--iface", "lo"}, "1 rank of "},
		{"--net over iface", `iface = "nosuch0"`, []string{"-np", "1", "--net", "127.0.0.0/8"}, "1 rank of "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := filepath.Join(dir, "c.toml")
			os.WriteFile(cfg, []byte(tc.file+"\n"), 0o644)
			r := gorun(t, "", append(append([]string{"--config", cfg, "--dry-run"}, tc.args...), "true")...)
			if r.code != 0 || !strings.Contains(r.stdout, tc.want) {
				t.Errorf("status %d, want 0 and %q in stdout:\n%s%s", r.code, tc.want, r.stdout, r.stderr)
			}
		})
	}
	r := gorun(t, "", "-H", "localhost:1", "--hostfile", hostfile, "true")
	if r.code != 2 || !strings.Contains(r.stderr, "-H and --hostfile both given") {
		t.Errorf("both on the command line: status %d, stderr %q", r.code, r.stderr)
	}
}

// A value a config file gave, refused only beside another (stdin beside
// the ranks, profile_cpu without profile, a hostfile that cannot be
// read), is named by FILE:LINE and key, as a flag would be by its name;
// given by a flag instead, by the flag. They all said the flag.
func TestConfigValuesJudgedWithOthers(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "c.toml")
	for _, tc := range []struct {
		file string
		args []string
		want string
	}{
		{"np = 1\nstdin = \"7\"", nil, cfg + ":2: stdin 7: there is only 1 rank (0)"},
		{"stdin = \"7\"", []string{"-np", "2"}, cfg + ":1: stdin 7: there are only 2 ranks (0..1)"},
		{"stdin = \"7\"", []string{"-np", "2", "--stdin", "5"}, "--stdin 5: there are only 2 ranks"},
		{"\nprofile_cpu = true", []string{"-np", "1"}, cfg + ":2: profile_cpu needs --profile DIR"},
		{"hostfile = \"/no/such/hosts\"", nil, cfg + ":1: hostfile: open /no/such/hosts"},
	} {
		os.WriteFile(cfg, []byte(tc.file+"\n"), 0o644)
		r := gorun(t, "", append(append([]string{"--config", cfg}, tc.args...), "true")...)
		if r.code != 2 || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%q with %q: status %d, want 2 and %q:\n%s", tc.file, tc.args, r.code, tc.want, r.stderr)
		}
	}
}

func TestGoPackage(t *testing.T) {
	r := gorun(t, "", "-np", "2", "--verbose", "./testdata/hello")
	if r.code != 0 || strings.Join(lines(r.stdout), "|") != "hello from rank 0 of 2|hello from rank 1 of 2" {
		t.Fatal(r)
	}
	m := regexpFind(`ranks of (\S+gorun-build-\S+)/hello`, r.stderr)
	if m == "" {
		t.Fatalf("no build directory in the verbose log:\n%s", r.stderr)
	}
	if _, err := os.Stat(m); !os.IsNotExist(err) {
		t.Errorf("build directory %s left behind (%v)", m, err)
	}
}

// TestBuildKilled: gorun killed with SIGKILL while it builds a Go package
// leaves nothing of the build running, and the next gorun that builds one
// removes the build directory it left. The go command built on to the
// end, and its directory stayed in $TMPDIR for good.
func TestBuildKilled(t *testing.T) {
	tmp, scratch := t.TempDir(), t.TempDir()
	pids := filepath.Join(scratch, "pids")
	// Every tool the go command runs waits first: the build is under way
	// until gorun is killed. (-toolexec is part of the cache keys: no
	// cached result makes the build quick.)
	toolexec := filepath.Join(scratch, "slowtool")
	os.WriteFile(toolexec, []byte("#!/bin/sh\necho $$ >>"+pids+"\nsleep 60\nexec \"$@\"\n"), 0o755)
	cmd := gorunCmd(t, "-np", "1", "./testdata/hello")
	cmd.Env = append(cmd.Env, "TMPDIR="+tmp, "GOFLAGS=-toolexec="+toolexec)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	var tool int
	for deadline := time.Now().Add(time.Minute); tool == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no tool of the build started in a minute")
		}
		b, _ := os.ReadFile(pids)
		if f := strings.Fields(string(b)); len(f) > 0 {
			tool, _ = strconv.Atoi(f[0])
		}
	}
	group, ok := runningIn(tool)
	if !ok {
		t.Fatalf("tool %d gone before gorun was killed", tool)
	}
	if group == cmd.Process.Pid || group == syscall.Getpgrp() {
		t.Fatalf("the build runs in gorun's process group %d", group)
	}
	dirs, _ := filepath.Glob(filepath.Join(tmp, "gorun-build-"+strconv.Itoa(cmd.Process.Pid)+"-*"))
	if len(dirs) != 1 {
		t.Fatalf("build directories of gorun %d in %s: %q, want one", cmd.Process.Pid, tmp, dirs)
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	killed := time.Now()
	for left := groupMembers(group); len(left) > 0; left = groupMembers(group) {
		if time.Since(killed) > 5*time.Second {
			t.Fatalf("5s after gorun's SIGKILL, its build's group %d still has processes %v", group, left)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("the build's group was gone %v after gorun's SIGKILL", time.Since(killed).Round(time.Millisecond))
	if _, err := os.Stat(dirs[0]); err != nil {
		t.Fatalf("the build directory went with gorun (%v): this test cannot see the next gorun remove it", err)
	}
	next := gorunCmd(t, "-np", "1", "./testdata/hello")
	next.Env = append(next.Env, "TMPDIR="+tmp)
	if r := runGorun(t, next); r.code != 0 {
		t.Fatal(r)
	}
	if _, err := os.Stat(dirs[0]); !os.IsNotExist(err) {
		t.Errorf("the next build left the killed gorun's %s (%v)", dirs[0], err)
	}
	if left, _ := os.ReadDir(tmp); len(left) != 0 {
		t.Errorf("left in TMPDIR: %v", left)
	}
}

// runningIn is the process group of pid, and whether pid runs: a zombie,
// or no such process, does not.
func runningIn(pid int) (pgrp int, ok bool) {
	f := procStat(pid) // state ppid pgrp ...
	if len(f) < 3 || f[0] == "Z" || f[0] == "X" {
		return 0, false
	}
	pgrp, _ = strconv.Atoi(f[2])
	return pgrp, true
}

// groupMembers are the pids of process group pgrp's running processes.
func groupMembers(pgrp int) []int {
	entries, _ := os.ReadDir("/proc")
	var left []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if g, ok := runningIn(pid); ok && g == pgrp {
			left = append(left, pid)
		}
	}
	return left
}

func TestBadInput(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "bad.toml")
	os.WriteFile(cfg, []byte("np = 2\n\ntag_output = \"yes\"\n"), 0o644)
	// Found before any rank starts: exec said "no such file or directory"
	// of the script (127) and "exec format error" (1), after "stopping
	// the other ranks" of none.
	badInterp, noShebang := filepath.Join(dir, "badinterp"), filepath.Join(dir, "noshebang")
	os.WriteFile(badInterp, []byte("#!/no/such/interp -x\necho hi\n"), 0o755)
	// Said "start .../crlf.sh: fork/exec .../crlf.sh: no such file or
	// directory" (127) of the script itself.
	crlf := filepath.Join(dir, "crlf.sh")
	os.WriteFile(crlf, []byte("#!/bin/sh\r\necho hi\r\n"), 0o755)
	// Was status 1, "fork/exec .../fakeelf: exec format error".
	fakeELF := filepath.Join(dir, "fakeelf")
	os.WriteFile(fakeELF, []byte("\x7fELF\x02\x01\x01\x00garbage"), 0o755)
	os.WriteFile(noShebang, []byte("echo hi\n"), 0o755)
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string // a regexp the one stderr line must match
	}{
		{"unknown flag", []string{"--bogus", "-np", "2", "true"}, 2, `unknown flag --bogus: see gorun --help`},
		{"empty host list", []string{"-H", "", "-np", "1", "true"}, 2, `--host "": give a value, or leave the flag out`},
		{"empty stdin", []string{"--stdin", "", "-np", "1", "true"}, 2, `--stdin "": give a value`},
		{"iface not here", []string{"-np", "1", "--iface", "nosuch0", "true"}, 2, `--iface nosuch0: no interface nosuch0; this host has .*\blo\b.* \(see ip addr\)`},
		{"wdir missing", []string{"-np", "1", "--wdir", "/no/such/dir", "true"}, 2, `--wdir /no/such/dir: no such directory; create it`},
		{"host list count 0", []string{"-H", "localhost:0", "true"}, 2, `-H localhost:0: the count after : must be a positive whole number \(e\.g\. node1:4\)`},
		{"net not here", []string{"-np", "1", "--net", "203.0.113.0/24", "true"}, 2, `--net 203.0.113.0/24: no local address in it`},
		{"missing value", []string{"-np", "2", "--timeout"}, 2, `--timeout needs a value, a duration such as 30s`},
		// Said "want a duration such as 30s", of a duration.
		{"duration overflow", []string{"--timeout", "10000000h", "-np", "1", "true"}, 2, `--timeout "10000000h": too long: want at most 2562047h`},
		{"misspelt flag", []string{"--tag-ouput", "-np", "2", "true"}, 2, `unknown flag --tag-ouput: did you mean --tag-output\?`},
		{"mpirun flag", []string{"--mca", "btl", "tcp,self", "-np", "2", "true"}, 2, `unknown flag --mca: gorun has no MCA parameters; GORUN_TRANSPORT=tcp`},
		{"mpirun display-map", []string{"--display-map", "-np", "2", "true"}, 2, `unknown flag --display-map: --dry-run prints which ranks go to which host`},
		{"mpirun output-filename", []string{"--output-filename", "out", "-np", "2", "true"}, 2, `unknown flag --output-filename: --output-dir DIR writes`},
		{"torchrun standalone", []string{"--standalone", "-np", "2", "true"}, 2, `unknown flag --standalone: gorun runs its own rendezvous`},
		{"-v", []string{"-v"}, 2, `unknown flag -v: did you mean --version or --verbose\?`},
		// Said "did you mean -n?", which changes the number of ranks.
		{"mpirun -N", []string{"-N", "2", "-np", "1", "true"}, 2, `unknown flag -N: Open MPI's -N is ranks per host: give --npernode N`},
		{"mpich -f", []string{"-f", "hosts", "true"}, 2, `unknown flag -f: MPICH's -f is the hostfile: give --hostfile FILE`},
		{"glued -np", []string{"-np2", "true"}, 2, `unknown flag -np2: write -np 2, with a space`},
		// Took -np for the host list and 2 for the program (status 127).
		{"flag for a value", []string{"-H", "-np", "2", "true"}, 2, `--host -np: a flag where --host wants its value`},
		// Was status 255, "host h: cannot start its agent".
		{"launch agent missing", []string{"-H", "h.invalid:1", "--net", "127.0.0.0/8", "--launch-agent", "/no/such/agent", "true"}, 2, `--launch-agent "/no/such/agent": /no/such/agent: no such program, or not executable`},
		// Said "how many ranks? give -np N, as in gorun -np 4 help".
		{"help command", []string{"help", "hostfile"}, 2, `gorun has no help command: gorun --help lists the flags`},
		{"flag for a dir", []string{"--output-dir", "--np=2", "true"}, 2, `--output-dir --np=2: a flag where --output-dir wants its value`},
		{"bool with a value", []string{"--verbose=2", "-np", "1", "true"}, 2, `--verbose "2": want true or false \(see gorun --help\)`},
		{"mpirun map-by", []string{"-np", "2", "--map-by", "core", "true"}, 2, `--map-by "core": want slot or node \(gorun places ranks on hosts only; --bind-to core`},
		{"bad bind", []string{"-np", "2", "--bind-to", "numa", "true"}, 2, `--bind-to "numa": want auto, none, hwthread, core or socket`},
		{"bad timer slack", []string{"-np", "2", "--timer-slack", "5", "true"}, 2, `--timer-slack "5": want auto, 0, or a duration up to 1s such as 500us`},
		{"bad duration", []string{"-np", "2", "--timeout", "1x", "true"}, 2, `--timeout "1x": want a duration such as 30s`},
		{"np 0", []string{"-np", "0", "true"}, 2, `-np 0: want at least 1 rank`},
		{"np missing", []string{"true"}, 2, `give -np N`},
		{"-x before a flag", []string{"-x", "-np", "2", "true"}, 2, `-x -np: a flag where -x wants VAR or VAR=VALUE, as in -x OMP_NUM_THREADS=4`},
		{"-x bad name", []string{"-np", "1", "-x", "1FOO=2", "true"}, 2, `-x "1FOO=2": want VAR or VAR=VALUE, VAR letters, digits and _, not starting with a digit`},
		{"topo np missing", []string{"--topo"}, 2, `how many ranks\? give -np N, as in gorun --topo -np 4`},
		{"tune np missing", []string{"--tune"}, 2, `how many ranks\? give -np N, as in gorun --tune -np 4`},
		// A huge -np crashed gorun (makeslice) or took the machine's memory.
		{"np huge", []string{"-np", "9223372036854775807", "true"}, 2, `-np 9223372036854775807: at most 1048576 ranks in one job`},
		{"np crowds this machine", []string{"-np", "100000", "--dry-run", "true"}, 2, `-np 100000 on this machine's \d+ CPUs?: more than 64 ranks per CPU needs --oversubscribe`},
		{"mpmd np huge", []string{"-np", "9223372036854775807", "true", ":", "-np", "2", "true"}, 2, `program 1 of the MPMD job \(true\): -np 9223372036854775807: at most 1048576 ranks`},
		{"mpmd np sum", []string{"-np", "1000000", "true", ":", "-np", "1000000", "true", ":", "-np", "2", "true"}, 2, `program 2 of the MPMD job \(true\): -np 1000000: the programs' ranks add up to more than 1048576`},
		{"np not a number", []string{"-np", "two", "true"}, 2, `-np "two": want a whole number`},
		{"no program", []string{"-np", "2"}, 2, `no program to run`},
		{"nothing", nil, 2, `no program to run: usage is gorun \[flags\] PROGRAM`},
		{"bad stdin", []string{"-np", "2", "--stdin", "5", "true"}, 2, `--stdin 5: there are only 2 ranks`},
		{"program not on PATH", []string{"-np", "2", "no-such-program-xyz"}, 127, `no-such-program-xyz: not found on PATH \(`},
		{"program path missing", []string{"-np", "2", "./no/such"}, 127, `\./no/such: no such file or directory \(looked at /\S+/no/such\)`},
		{"go file", []string{"-np", "1", "../../examples/hello/main.go"}, 126, `\.\./\.\./examples/hello/main\.go is a Go source file: give its package's directory, \.\./\.\./examples/hello, and gorun builds it`},
		{"bad interpreter", []string{"-np", "2", badInterp}, 127, regexpQuote(badInterp) + `: its #! line names /no/such/interp, which does not exist`},
		{"crlf script", []string{"-np", "1", crlf}, 127, regexpQuote(crlf) + `: its #! line names "/bin/sh\\r", which does not exist: the file has Windows \(CRLF\) line endings, .*; convert them with sed -i 's/\\r\$//' ` + regexpQuote(crlf) + ` \(or dos2unix ` + regexpQuote(crlf) + `\)`},
		{"damaged ELF", []string{"-np", "1", fakeELF}, 126, regexpQuote(fakeELF) + ` is not a program this machine can run: an ELF file of 15 bytes, cut short in its header: a truncated or damaged file; copy or build it again`},
		{"no #! line", []string{"-np", "2", noShebang}, 126, regexpQuote(noShebang) + ` is not a program this machine can run \(no #! line, not an ELF for this machine\)`},
		{"malformed config", []string{"--config", cfg, "true"}, 2, regexpQuote(cfg) + `:3: .*tag_output`},
		{"missing config", []string{"--config", cfg + ".missing", "-np", "1", "true"}, 2, `no such file`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := gorun(t, "", tc.args...)
			if r.code != tc.code {
				t.Errorf("status %d, want %d", r.code, tc.code)
			}
			if !regexpMatch(`^gorun: .*`+tc.want+`.*\n$`, r.stderr) {
				t.Errorf("stderr is not one line matching %q:\n%s", tc.want, r.stderr)
			}
			if r.stdout != "" {
				t.Errorf("stdout: %q", r.stdout)
			}
		})
	}
}

// TestProgramNotOnPath: a name not on PATH is said with the path to give
// only where the working directory (or --wdir) has it, else with the
// nearest program on PATH, if one is near. "give a path such as ./NAME"
// was said of every name, ./NAME there or not.
func TestProgramNotOnPath(t *testing.T) {
	bin, work := t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(bin, "mytool"), []byte("#!/bin/sh\n"), 0o755)
	os.WriteFile(filepath.Join(bin, "mytoool.txt"), []byte("not a program\n"), 0o644)
	os.Mkdir(filepath.Join(work, "sub"), 0o755)
	os.WriteFile(filepath.Join(work, "sub", "mytoool"), []byte("#!/bin/sh\n"), 0o755)
	os.WriteFile(filepath.Join(work, "here"), []byte("#!/bin/sh\n"), 0o755)
	for _, tc := range []struct {
		name string
		args []string
		hint string // what follows "not found on PATH (bin)"
	}{
		{"near", []string{"-np", "1", "mytoool"}, "; did you mean mytool?"},
		{"nothing near", []string{"-np", "1", "zzqqxx"}, ""},
		{"here", []string{"-np", "1", "here"}, "; give a path such as ./here"},
		{"in wdir", []string{"-np", "1", "--wdir", "sub", "mytoool"}, "; give a path such as sub/mytoool (a path is taken from gorun's working directory, not from --wdir)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := gorunCmd(t, tc.args...)
			cmd.Dir = work
			cmd.Env = append(cmd.Env, "PATH="+bin)
			r := runGorun(t, cmd)
			prog := tc.args[len(tc.args)-1]
			if want := "gorun: " + prog + ": not found on PATH (" + bin + ")" + tc.hint + "\n"; r.code != 127 || r.stderr != want {
				t.Errorf("status %d, stderr %q; want 127 and %q", r.code, r.stderr, want)
			}
		})
	}
}

// TestStartFailureStatus: a rank that cannot start for a reason other than
// its program exits with the status gorun(1) gives: 2 for a --bind-to
// that overloads a core, 1 for an output file gorun cannot create (it
// was 127, the shell's "not found", when the error was ENOENT). The
// overload is found before gorun starts a rank or says a word of what it
// sets for them (it printed GOMAXPROCS=2 "for 1 rank", the one it could
// bind).
func TestStartFailureStatus(t *testing.T) {
	np := fmt.Sprint(2 * runtime.NumCPU())
	// A directory where rank 0's output file goes.
	blocked := t.TempDir()
	if err := os.Mkdir(filepath.Join(blocked, "rank.0.out"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"bind overload", []string{"-np", np, "--bind-to", "core", "true"}, 2, "--bind-to core: " + np + " ranks on"},
		{"output file", []string{"-np", "1", "--output-dir", blocked, "true"}, 1, filepath.Join(blocked, "rank.0.out")},
		// Found only when rank 0's file could not be created (status 1),
		// after a Go program's build.
		{"output dir", []string{"-np", "1", "--output-dir", "/proc/1", "true"}, 2, "--output-dir /proc/1: cannot write in it"},
		{"profile dir", []string{"-np", "1", "--profile", "/proc/1/x", "true"}, 2, "--profile /proc/1/x: cannot create /proc/1/x"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := gorun(t, "", tc.args...)
			if r.code != tc.code || !strings.Contains(r.stderr, tc.want) {
				t.Errorf("status %d, want %d, and stderr saying %q:\n%s", r.code, tc.code, tc.want, r.stderr)
			}
			// The first start failed: no other rank to stop, none started to count.
			if strings.Contains(r.stderr, "stopping the other ranks") || strings.Contains(r.stderr, "were started") {
				t.Errorf("gorun spoke of other ranks:\n%s", r.stderr)
			}
			if tc.code == 2 && (strings.Contains(r.stderr, "GOMAXPROCS") || strings.Contains(r.stderr, "were started") || strings.Contains(r.stderr, "oversubscribed")) {
				t.Errorf("gorun spoke of ranks it does not start:\n%s", r.stderr)
			}
		})
	}
}

// TestTimeoutWithStdoutBlocked: gorun's stdout is a pipe nobody reads.
// The job times out, and gorun must exit with 124 while the pipe is still
// full (it used to wait for the reader, and say nothing meanwhile: its
// message on stderr waited behind the blocked stdout).
func TestTimeoutWithStdoutBlocked(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	cmd := gorunCmd(t, "-np", "1", "--timeout", "1s", "--kill-grace", "1s", "sh", "-c", "yes")
	cmd.Stdout = w
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
	case <-time.After(30 * time.Second): // a hang guard, not a timing
		cmd.Process.Kill()
		<-done
		t.Fatalf("gorun still running 30 s after a 1 s timeout, its stdout unread:\n%s", stderr.String())
	}
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 124 || !strings.Contains(stderr.String(), "timed out") {
		t.Errorf("gorun: %v, want status 124 and a message that the job timed out:\n%s", err, stderr.String())
	}
}

// TestSlowReaderGetsAll: a rank that ends by itself has all its output
// written, however late gorun's stdout is read: the drain deadline that
// lets a stopped job exit applies only once the job is being stopped.
func TestSlowReaderGetsAll(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	const n = 100 << 10 // more than one pipe holds, less than the pipes and a copy buffer: the rank ends at once
	cmd := gorunCmd(t, "-np", "1", "sh", "-c", fmt.Sprintf("yes | head -c %d", n))
	cmd.Stdout = w
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	time.Sleep(3 * time.Second) // past the 2 s drain deadline, reading nothing
	got, err := io.Copy(io.Discard, r)
	if werr := cmd.Wait(); werr != nil || err != nil || got != n {
		t.Errorf("read %d bytes (%v), gorun %v; want all %d", got, err, werr, n)
	}
}

func TestVersion(t *testing.T) {
	r := gorun(t, "", "--version")
	if r.code != 0 || !regexpMatch(`^gorun \S+ \(go1\.[0-9.]+\)\n$`, r.stdout) || r.stderr != "" {
		t.Errorf("gorun --version: %v", r)
	}
}

func TestBuildFailure(t *testing.T) {
	r := gorun(t, "", "-np", "2", "./testdata/nobuild")
	if r.code == 0 || !strings.Contains(r.stderr, "go build") || !strings.Contains(r.stderr, "undefinedThing") {
		t.Fatalf("want the compiler's message\n%v", r)
	}
}

// TestSignalStopsJob sends SIGINT to gorun, which passes it on: every rank
// and the child each rank started must be gone when gorun returns. With
// trapTerm the ranks ignore SIGINT and SIGTERM, and a second SIGINT must
// kill them.
func TestSignalStopsJob(t *testing.T) {
	for _, tc := range []struct {
		name     string
		trapTerm bool
	}{{"sigint", false}, {"second sigint kills", true}} {
		t.Run(tc.name, func(t *testing.T) {
			pidfile := filepath.Join(t.TempDir(), "pids")
			script := `sleep 300 & echo "$$ $!" >> ` + pidfile + `; wait`
			if tc.trapTerm {
				script = `trap '' INT TERM; sleep 300 & echo "$$ $!" >> ` + pidfile + `; while :; do wait; done`
			}
			const n = 3
			cmd := gorunCmd(t, "-np", fmt.Sprint(n), "--kill-grace", "5m", "sh", "-c", script)
			var stderr syncBuffer
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			pids := waitPids(t, pidfile, 2*n)
			cmd.Process.Signal(syscall.SIGINT)
			if tc.trapTerm {
				waitLine(t, &stderr, "send it again")
				cmd.Process.Signal(syscall.SIGINT)
			}
			err := cmd.Wait()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 130 {
				t.Errorf("gorun ended with %v, want status 130\n%s", err, stderr.String())
			}
			for _, pid := range pids {
				if alive(pid) {
					t.Errorf("pid %d survived gorun", pid)
					syscall.Kill(pid, syscall.SIGKILL)
				}
			}
		})
	}
}

// TestStopDuringStart: gorun acts on a signal, and on a rank that fails,
// while it is still starting ranks: 150 busy ranks take seconds to start
// on a small machine, and the job must stop without starting the rest.
func TestStopDuringStart(t *testing.T) {
	t.Run("sigint", func(t *testing.T) {
		pidfile := filepath.Join(t.TempDir(), "pids")
		cmd := gorunCmd(t, "-np", "150", "--oversubscribe", "sh", "-c", `echo $$ >> `+pidfile+`; while :; do :; done`)
		var stderr syncBuffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		waitPids(t, pidfile, 3)
		cmd.Process.Signal(syscall.SIGINT)
		err := cmd.Wait()
		if code := exitCodeOf(err); code != 130 {
			t.Errorf("gorun exited %d, want 130\n%s", code, stderr.String())
		}
		if !strings.Contains(stderr.String(), " of 150 ranks were started before the job stopped") {
			t.Errorf("all 150 ranks were started after the signal\n%s", stderr.String())
		}
	})
	t.Run("rank fails at once", func(t *testing.T) {
		r := gorun(t, "", "-np", "150", "--oversubscribe", "sh", "-c", `[ "$GORUN_RANK" = 0 ] && exit 3; while :; do :; done`)
		if r.code != 3 || !strings.Contains(r.stderr, "rank 0 (pid") || !strings.Contains(r.stderr, " of 150 ranks were started before the job stopped") {
			t.Errorf("want status 3, rank 0 named, and the start cut short\n%v", r)
		}
	})
}

// TestStopDuringBuild: a signal while gorun builds a Go package stops the
// build and exits 128+signal, as a signal during the job does.
func TestStopDuringBuild(t *testing.T) {
	bin := t.TempDir()
	// A go command whose build never ends.
	marker := filepath.Join(bin, "building")
	os.WriteFile(filepath.Join(bin, "go"), []byte("#!/bin/sh\ntouch "+marker+"\nexec sleep 300\n"), 0o755)
	cmd := gorunCmd(t, "-np", "2", "./testdata/nobuild")
	cmd.Env = append(cmd.Environ(), "PATH="+bin+":"+os.Getenv("PATH"))
	var stderr syncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ { // until gorun runs the build
		if _, err := os.Stat(marker); err == nil {
			break
		}
		if i > 3000 {
			t.Fatalf("gorun never ran go build\n%s", stderr.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	cmd.Process.Signal(syscall.SIGINT)
	err := cmd.Wait()
	if code := exitCodeOf(err); code != 130 {
		t.Errorf("gorun exited %d, want 130\n%s", code, stderr.String())
	}
}

// TestStdinAllSlowRank: with --stdin all, a rank that does not read its
// input does not hold back one that does. Rank 0 reads nothing until rank
// 1 has read all 1 MiB (more than a pipe holds) and said so.
func TestStdinAllSlowRank(t *testing.T) {
	marker := filepath.Join(t.TempDir(), "read")
	script := `if [ "$GORUN_RANK" = 0 ]; then while [ ! -e ` + marker + ` ]; do sleep 0.05; done; else wc -c; touch ` + marker + `; fi`
	input := strings.Repeat("0123456789abcde\n", 1<<16)
	r := gorun(t, input, "-np", "2", "--stdin", "all", "--timeout", "60s", "sh", "-c", script)
	if r.code != 0 || !strings.Contains(r.stdout, "1048576") {
		t.Errorf("want rank 1 to read 1048576 bytes while rank 0 reads none\n%v", r)
	}
}

// TestMaxRestarts: a rank's failure starts the whole job again, up to N
// times, each start told which it is; the last start's status is gorun's;
// a timeout is not a failure to restart after.
func TestMaxRestarts(t *testing.T) {
	script := `echo "rank $GORUN_RANK start $GORUN_RESTART_COUNT of $TORCHELASTIC_MAX_RESTARTS"; [ "$GORUN_RANK" = 1 ] && [ "$GORUN_RESTART_COUNT" -lt "$FAILS" ] && exit 3; exit 0`
	for _, tc := range []struct {
		fails, max, code, starts int
	}{{0, 2, 0, 1}, {1, 2, 0, 2}, {2, 2, 0, 3}, {3, 2, 3, 3}} {
		r := gorun(t, "", "-np", "2", "--max-restarts", fmt.Sprint(tc.max), "-x", fmt.Sprintf("FAILS=%d", tc.fails), "sh", "-c", script)
		if r.code != tc.code {
			t.Errorf("%d failures, --max-restarts %d: status %d, want %d\n%v", tc.fails, tc.max, r.code, tc.code, r)
		}
		for start := 0; start < 4; start++ {
			// Rank 1 prints before it fails; rank 0 may be stopped first.
			line := fmt.Sprintf("rank 1 start %d of %d\n", start, tc.max)
			if got := strings.Contains(r.stdout, line); got != (start < tc.starts) {
				t.Errorf("%d failures, --max-restarts %d: start %d ran: %v, want %v\n%v", tc.fails, tc.max, start, got, start < tc.starts, r)
			}
		}
		if n := strings.Count(r.stderr, "restarting the job"); n != tc.starts-1 {
			t.Errorf("%d failures: %d restart lines, want %d\n%v", tc.fails, n, tc.starts-1, r)
		}
	}
	r := gorun(t, "", "-np", "1", "--max-restarts", "3", "--timeout", "200ms", "sleep", "30")
	if r.code != 124 || strings.Contains(r.stderr, "restarting") {
		t.Errorf("a timed-out job: want status 124 and no restart\n%v", r)
	}
	// With --output-dir, each earlier start's files are kept in
	// DIR/start.K: the output of the failure that restarted the job.
	od := t.TempDir()
	r = gorun(t, "", "-q", "-np", "1", "--max-restarts", "1", "--output-dir", od, "sh", "-c", "echo start $GORUN_RESTART_COUNT; exit 1")
	for file, want := range map[string]string{"start.0/rank.0.out": "start 0\n", "rank.0.out": "start 1\n"} {
		if b, err := os.ReadFile(filepath.Join(od, file)); err != nil || string(b) != want {
			t.Errorf("--output-dir with a restart: %s holds %q (%v), want %q\n%v", file, b, err, want, r)
		}
	}
	// --timeout bounds the job over every start, as mpirun's: restarts
	// that fail quickly do not make it a limit per start.
	r = gorun(t, "", "-q", "-np", "1", "--max-restarts", "50", "--timeout", "1s", "sh", "-c", "sleep 0.3; exit 1")
	if r.code != 124 || strings.Count(r.stderr, "restarting") > 4 {
		t.Errorf("starts that fail every 0.3 s under --timeout 1s: want status 124 after at most 4 restarts\n%v", r)
	}
	if r := gorun(t, "", "-np", "1", "--max-restarts", "-1", "true"); r.code != 2 || !strings.Contains(r.stderr, "--max-restarts -1") {
		t.Errorf("--max-restarts -1: want a usage error\n%v", r)
	}
}

// TestNPerNodeAlone: without a host list and without -np, --npernode N
// runs N ranks on this machine, as mpirun --npernode N does (it asked
// for -np).
func TestNPerNodeAlone(t *testing.T) {
	r := gorun(t, "", "-q", "--npernode", "2", "sh", "-c", "echo $GORUN_SIZE")
	if r.code != 0 || r.stdout != "2\n2\n" {
		t.Fatalf("gorun --npernode 2: want two ranks of a job of 2\n%v", r)
	}
}

// TestMPMD: Open MPI's MPMD syntax runs a server program and a worker
// program as one job, ranks numbered in order, each program with its own
// -x; they find each other and exchange messages.
func TestMPMD(t *testing.T) {
	r := gorun(t, "", "-np", "1", "./testdata/mpmd/server", ":", "-np", "3", "-x", "ROLE=worker", "./testdata/mpmd/worker")
	if r.code != 0 || !strings.Contains(r.stdout, "server: rank 0 of 4 got 60 from the workers") {
		t.Fatalf("want the server to get 10+20+30 from 3 workers\n%v", r)
	}
	for w := 1; w <= 3; w++ {
		if line := fmt.Sprintf("worker: rank %d of 4, role worker\n", w); !strings.Contains(r.stdout, line) {
			t.Errorf("stdout lacks %q\n%v", line, r)
		}
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-np", "1", "true", ":", "true"}, "how many ranks of true? give -np M"},
		{[]string{"-np", "1", "true", ":", "-np", "2"}, "no program"},
		{[]string{"-np", "1", "true", ":", "-np", "x", "true"}, `-np "x"`},
		{[]string{"-np", "1", "true", ":", "-np", "1", "-H", "a", "true"}, "-H is not taken per program"},
		{[]string{"-np", "1", "true", ":", "-np", "1", "-x"}, "-x needs a value"},
		// Said "-np 0 before true", where no -np was given.
		{[]string{"-H", "localhost:2", "true", ":", "-np", "1", "true"}, "program 1 of the MPMD job: no -np before true: every program of an MPMD job"},
		// Said "how many ranks? give -np N, as in gorun -np 4 true".
		{[]string{"true", ":", "-np", "2", "true"}, "program 1 of the MPMD job: how many ranks of true? give -np N before it, as in gorun -np 1 true : -np 4 true"},
		{[]string{"-np", "1", "true", ":", "-np", "1", "-np", "2", "true"}, "-np 1 and -np 2: give a program's -np once"},
		{[]string{"-np", "1", "true", ":", "---np", "1", "true"}, "unknown flag ---np: see gorun --help"},
		// Said "--bogus is not taken per program", as of a flag gorun has.
		{[]string{"-np", "1", "true", ":", "-np", "1", "--bogus", "true"}, `program 2 (after ":" number 1): unknown flag --bogus: see gorun --help`},
		{[]string{"-np", "1", "true", ":", "-np", "1", "--tag-ouput", "true"}, "unknown flag --tag-ouput: did you mean --tag-output?"},
		// Said `-np "0": want a whole number of ranks`, 0 being one.
		{[]string{"-np", "1", "true", ":", "-np", "0", "true"}, `program 2 (after ":" number 1): -np 0: want at least 1 rank`},
		// Said ":: not found on PATH", status 127.
		{[]string{"-np", "1", ":", "-np", "1", "true"}, `program 1 of the MPMD job: no program before the first ":"`},
	} {
		if r := gorun(t, "", tc.args...); r.code != 2 || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("gorun %q: want status 2 and %q\n%v", tc.args, tc.want, r)
		}
	}
	if r := gorun(t, "", "-np", "1", "true", ":", "-np", "1", "./no/such"); r.code != 127 || !strings.HasPrefix(r.stderr, "gorun: program 2 of the MPMD job: ./no/such: no such file") {
		t.Errorf("a missing second program: want status 127 and its number\n%v", r)
	}
}

// TestDaemonsDie: a rank's descendants that detach from it (a double fork
// with setsid, or a job of a shell with job control, in a process group of
// its own) outlive the rank but not gorun: it is their subreaper and kills
// them when the job is over.
func TestDaemonsDie(t *testing.T) {
	// Each rank waits until its daemon has written its pid, then exits.
	for name, daemon := range map[string]string{
		"setsid":   `setsid sh -c 'echo $$ > PIDS.tmp; mv PIDS.tmp PIDS; sleep 300' &`,
		"set -m":   `set -m 2>/dev/null; sleep 300 & echo $! > PIDS`,
		"orphaned": `(sh -c 'echo $$ > PIDS.tmp; mv PIDS.tmp PIDS; exec sleep 300' &)`,
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			pids := filepath.Join(dir, "pid.$GORUN_RANK")
			script := strings.ReplaceAll(daemon, "PIDS", pids) + "\n" + `while [ ! -s ` + pids + ` ]; do sleep 0.02; done`
			r := gorun(t, "", "-np", "2", "sh", "-c", script)
			if r.code != 0 {
				t.Fatalf("gorun: %v", r)
			}
			for rank := 0; rank < 2; rank++ {
				b, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("pid.%d", rank)))
				var pid int
				if _, serr := fmt.Sscan(string(b), &pid); err != nil || serr != nil {
					t.Fatalf("rank %d's daemon left no pid: %v %v", rank, err, serr)
				}
				for i := 0; alive(pid) && i < 100; i++ {
					time.Sleep(10 * time.Millisecond) // a zombie's reaping
				}
				if alive(pid) {
					t.Errorf("pid %d outlived gorun", pid)
					syscall.Kill(pid, syscall.SIGKILL)
				}
			}
		})
	}
}

// TestOrphansReaped: the rank's detached children that exit during the job
// do not stay zombies of gorun, their subreaper, until the job ends.
func TestOrphansReaped(t *testing.T) {
	dir := t.TempDir()
	ready, done := filepath.Join(dir, "ready"), filepath.Join(dir, "done")
	cmd := gorunCmd(t, "-np", "1", "sh", "-c", `for i in 1 2 3; do (sh -c 'sleep 0.2' &); done; sleep 0.5; touch `+ready+`; while [ ! -e `+done+` ]; do sleep 0.05; done`)
	var stderr syncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		os.WriteFile(done, nil, 0o644)
		if err := cmd.Wait(); err != nil {
			t.Errorf("gorun: %v\n%s", err, stderr.String())
		}
	}()
	waitFile(t, ready)
	zombies := func() int {
		n := 0
		for _, pid := range childrenOf(cmd.Process.Pid) {
			if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
				if f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:])); len(f) > 0 && f[0] == "Z" {
					n++
				}
			}
		}
		return n
	}
	for i := 0; zombies() > 0; i++ {
		if i > 1000 {
			t.Fatalf("%d exited orphans are still zombies of gorun after 10s", zombies())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitFile waits until path exists.
func waitFile(t *testing.T, path string) {
	t.Helper()
	for i := 0; ; i++ {
		if _, err := os.Stat(path); err == nil {
			return
		}
		if i > 3000 {
			t.Fatalf("%s never appeared", path)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// childrenOf lists the processes whose parent is pid.
func childrenOf(pid int) []int {
	ents, _ := os.ReadDir("/proc")
	var kids []int
	for _, e := range ents {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", n))
		if err != nil {
			continue
		}
		f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
		if len(f) > 1 && f[1] == strconv.Itoa(pid) {
			kids = append(kids, n)
		}
	}
	return kids
}

// TestSigintReachesPython: Ctrl-C on gorun reaches Python ranks as
// SIGINT, as under torchrun: each gets KeyboardInterrupt and runs its
// finally block (where programs save a checkpoint).
func TestSigintReachesPython(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not installed")
	}
	dir := t.TempDir()
	script := filepath.Join(dir, "rank.py")
	// The rank says it is ready from inside the try, by a rename: a ready
	// file that open made could be seen, and the SIGINT sent, before the
	// rank had entered the try (it then died in open's close, in CI).
	os.WriteFile(script, []byte(`import os, sys, time
try:
    tmp = os.path.join(sys.argv[1], "tmp." + os.environ["RANK"])
    open(tmp, "w").close()
    os.rename(tmp, os.path.join(sys.argv[1], "ready." + os.environ["RANK"]))
    time.sleep(300)
except KeyboardInterrupt:
    print("rank", os.environ["RANK"], "KeyboardInterrupt", flush=True)
finally:
    print("rank", os.environ["RANK"], "finally", flush=True)
`), 0o644)
	cmd := gorunCmd(t, "-np", "2", "--kill-grace", "1m", py, script, dir)
	var stdout, stderr syncBuffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for r := 0; r < 2; r++ {
		for i := 0; ; i++ {
			if _, err := os.Stat(filepath.Join(dir, fmt.Sprintf("ready.%d", r))); err == nil {
				break
			}
			if i > 3000 {
				t.Fatalf("rank %d did not start\n%s", r, stderr.String())
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	cmd.Process.Signal(syscall.SIGINT)
	err = cmd.Wait()
	if code := exitCodeOf(err); code != 130 {
		t.Errorf("gorun exited %d, want 130\n%s", code, stderr.String())
	}
	for r := 0; r < 2; r++ {
		for _, want := range []string{"KeyboardInterrupt", "finally"} {
			if line := fmt.Sprintf("rank %d %s\n", r, want); !strings.Contains(stdout.String(), line) {
				t.Errorf("stdout lacks %q:\n%s\nstderr:\n%s", line, stdout.String(), stderr.String())
			}
		}
	}
}

// waitPids waits until file holds n pids and returns them.
func waitPids(t *testing.T, file string, n int) []int {
	t.Helper()
	for i := 0; ; i++ {
		b, _ := os.ReadFile(file)
		var pids []int
		for _, f := range strings.Fields(string(b)) {
			var p int
			fmt.Sscan(f, &p)
			pids = append(pids, p)
		}
		if len(pids) >= n {
			return pids
		}
		if i > 3000 {
			t.Fatalf("ranks did not start: %q", b)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// syncBuffer is a bytes.Buffer safe for one writer and one reader.
type syncBuffer = testhost.SyncBuffer

// waitLine waits until buf holds s.
func waitLine(t *testing.T, buf *syncBuffer, s string) {
	t.Helper()
	for i := 0; !strings.Contains(buf.String(), s); i++ {
		if i > 3000 {
			t.Fatalf("gorun did not say %q:\n%s", s, buf.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// alive reports whether pid is a process that is not a zombie.
func alive(pid int) bool {
	st := procState(pid)
	return st != "" && st != "Z" && st != "X"
}

// allStopped: every one of pids is stopped (state T), when want; none is,
// when not.
func allStopped(want bool, pids []int) bool {
	for _, p := range pids {
		if (procState(p) == "T") != want {
			return false
		}
	}
	return true
}

// procState is the state letter of pid in /proc (R, S, T, Z...); "" when
// there is no such process.
func procState(pid int) string {
	if f := procStat(pid); len(f) > 0 {
		return f[0]
	}
	return ""
}

// TestAllowRunAsRoot: mpirun's --allow-run-as-root, typed from habit, is
// accepted and changes nothing.
func TestAllowRunAsRoot(t *testing.T) {
	r := gorun(t, "", "--allow-run-as-root", "-np", "1", "true")
	if r.code != 0 || r.stderr != "" {
		t.Fatalf("want status 0 and no message\n%v", r)
	}
}

// TestHelpAnywhere: --help among gorun's flags prints the help and exits
// 0 whatever follows it (urfave's took the next word for a command:
// "No help topic for './prog'", status 1); after PROGRAM it is the
// program's.
func TestHelpAnywhere(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"-h"}, {"-np", "2", "--help", "./prog"}, {"--help", "foo"}} {
		r := gorun(t, "", args...)
		if r.code != 0 || !strings.HasPrefix(r.stdout, "NAME:\n   gorun - ") || r.stderr != "" {
			t.Errorf("gorun %q: want the help and status 0\n%v", args, r)
		}
	}
	if r := gorun(t, "", "-np", "1", "sh", "-c", `echo "$@"`, "x", "--help"); r.code != 0 || r.stdout != "--help\n" {
		t.Errorf("--help after PROGRAM: want it passed to the program\n%v", r)
	}
}

// TestBindTo runs 2 ranks bound to a core each: each must be allowed one
// CPU, not the same one, and --report-bindings must say which; each reads
// the host's CPUs, all of them, in GORUN_HOST_CPUS.
func TestBindTo(t *testing.T) {
	if runtime.NumCPU() < 2 {
		t.Skipf("binding 2 ranks to cores needs 2 CPUs, this machine has %d", runtime.NumCPU())
	}
	r := gorun(t, "", "-np", "2", "--bind-to", "hwthread", "--report-bindings", "--tag-output",
		"sh", "-c", `echo "$GORUN_BIND_TO $(grep Cpus_allowed_list /proc/self/status | cut -f2) $GORUN_HOST_CPUS"`)
	if r.code != 0 {
		t.Fatalf("status %d\n%v", r.code, r)
	}
	got := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		rank, rest, _ := strings.Cut(line, " ")
		i := strings.LastIndex(rest, " ")
		rest, cpus := rest[:max(i, 0)], rest[i+1:]
		if cpus != strconv.Itoa(runtime.NumCPU()) {
			t.Errorf("rank %s: GORUN_HOST_CPUS=%q, want the %d CPUs gorun may use", rank, cpus, runtime.NumCPU())
		}
		got[rank] = rest
	}
	if len(got) != 2 || got["[0]"] == got["[1]"] || !regexpMatch(`^hwthread \d+$`, got["[0]"]) || !regexpMatch(`^hwthread \d+$`, got["[1]"]) {
		t.Errorf("want each rank on one CPU of its own, got %q", r.stdout)
	}
	for rank, line := range got {
		cpu := strings.TrimPrefix(line, "hwthread ")
		if !strings.Contains(r.stderr, rank+" gorun: rank "+rank[1:2]+" on ") || !strings.Contains(r.stderr, "(cpu "+cpu+")") {
			t.Errorf("no report of rank %s on cpu %s in\n%s", rank, cpu, r.stderr)
		}
	}
}

// TestOutputClosed: when the reader of gorun's output goes (gorun ... |
// head), gorun stops the job and exits with the status of a SIGPIPE,
// saying so on stderr; it used to die of the SIGPIPE, leaving the ranks
// to theirs and their files in /dev/shm to nobody.
func TestOutputClosed(t *testing.T) {
	dir := t.TempDir()
	pids := filepath.Join(dir, "pids")
	cmd := gorunCmd(t, "-np", "2", "sh", "-c", `echo $$ >> `+pids+`; while :; do echo x; done`)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr syncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if _, err := out.Read(make([]byte, 1)); err != nil {
		t.Fatal(err)
	}
	waitPids(t, pids, 2)
	out.Close()
	err = cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 141 {
		t.Errorf("gorun: %v, want exit status 141\n%s", err, stderr.String())
	}
	if want := "gorun: gorun's output is closed (SIGPIPE): stopping"; !strings.Contains(stderr.String(), want) {
		t.Errorf("stderr lacks %q:\n%s", want, stderr.String())
	}
	for _, pid := range waitPids(t, pids, 2) {
		if alive(pid) {
			t.Errorf("rank pid %d outlived gorun", pid)
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// TestOutputFull: any other error writing gorun's stdout (here ENOSPC,
// /dev/full) stops the job as a closed pipe does, with one line naming
// the stream and the error, and status 1; it was ignored, and the job
// exited 0 with its output lost (or, for a rank that wrote without end,
// never).
func TestOutputFull(t *testing.T) {
	full, err := os.OpenFile("/dev/full", os.O_WRONLY, 0)
	if err != nil {
		t.Skip(err)
	}
	defer full.Close()
	for _, script := range []string{"echo hi; exec sleep 60", "exec yes"} {
		cmd := gorunCmd(t, "-q", "-np", "2", "sh", "-c", script)
		cmd.Stdout = full
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		start := time.Now()
		err := cmd.Run()
		var ee *exec.ExitError
		const want = `^gorun: writing to stdout: no space left on device; stopping the (running rank|2 running ranks)\n`
		if !errors.As(err, &ee) || ee.ExitCode() != 1 || !regexpMatch(want, stderr.String()) {
			t.Errorf("%s: gorun %v after %v, want status 1 and %q:\n%s", script, err, time.Since(start).Round(time.Millisecond), want, stderr.String())
		}
	}
}

// TestLeftEarly: rank 0 closes its world and exits 0 while the others wait
// on it; they fail for it, and the line that names the first of them says
// that rank 0 left early (it named rank 1 or 2 alone, as if at fault).
func TestLeftEarly(t *testing.T) {
	prog := filepath.Join(t.TempDir(), "errclose")
	if out, err := exec.Command("go", "build", "-o", prog, "./testdata/errclose").CombinedOutput(); err != nil {
		t.Fatalf("building testdata/errclose: %v\n%s", err, out)
	}
	r := gorun(t, "", "-np", "3", prog, "-exit0")
	want := `gorun: rank [12] \(pid \d+ on \S+\) exited with status 1, after losing rank 0 \(pid \d+ on \S+\), which had exited with status 0 while the others still used it`
	if r.code != 1 || !regexpMatch(want, r.stderr) {
		t.Fatalf("want status 1 and %q\n%v", want, r)
	}
}

// TestExitedBeforeInit: a program of an MPMD job that exits without
// calling spmd.Init leaves the others waiting there; gorun's line says the
// rank exited, not only that it never reached spmd.Init, and the rank
// that waited (examples/hello stops on SIGTERM) says it was stopped, not
// that it timed out.
func TestExitedBeforeInit(t *testing.T) {
	r := gorun(t, "", "-q", "--init-timeout", "1s", "-np", "1", helloBin(t), ":", "-np", "1", "true")
	want := `gorun: rank 1 of 2 never reached spmd.Init while the others waited there \(GORUN_INIT_TIMEOUT\); rank 1 exited with status 0 without calling it; stopping the job`
	if r.code != 1 || !regexpMatch(want, r.stderr) || !strings.Contains(r.stderr, "stopped after") {
		t.Fatalf("want status 1, %q and the waiting rank stopped\n%v", want, r)
	}
}

// TestBackgroundJob: a job started in the background of an interactive
// shell (gorun ... &) runs while its terminal belongs to the shell; it read
// the terminal for rank 0 and was stopped (SIGTTIN) before its ranks
// started. The terminal is script(1)'s, the shell an interactive bash.
func TestBackgroundJob(t *testing.T) {
	script, err1 := exec.LookPath("script")
	bash, err2 := exec.LookPath("bash")
	if err1 != nil || err2 != nil {
		t.Skip("needs script(1) and bash for a terminal with job control")
	}
	log := filepath.Join(t.TempDir(), "log")
	job := fmt.Sprintf(`%s -q -np 2 sh -c "echo done \$GORUN_RANK" > %s 2>&1 & sleep 30`, gorunBin, log)
	cmd := exec.Command(script, "-qfec", bash+" --norc -ic '"+job+"'", "/dev/null")
	cmd.Stdin = nil
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Kill()
		cmd.Wait()
	}()
	var got []byte
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if got, _ = os.ReadFile(log); strings.Contains(string(got), "done 0") && strings.Contains(string(got), "done 1") {
			return
		}
	}
	t.Fatalf("the background job did not run its 2 ranks in 20 s; its output:\n%s", got)
}

// TestCtrlZ: Ctrl-Z (SIGTSTP) stops the ranks with gorun, and fg (SIGCONT)
// continues them; the ranks, in process groups of their own, ran on
// while gorun was stopped.
func TestCtrlZ(t *testing.T) {
	cmd := exec.Command(gorunBin, "-q", "-np", "2", "sh", "-c", "exec sleep 60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Signal(syscall.SIGCONT)
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
	}()
	var ranks []int
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		for deadline := time.Now().Add(20 * time.Second); !ok(); time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: gorun %s, ranks %v", what, procState(cmd.Process.Pid), ranks)
			}
		}
	}
	waitFor("2 ranks started", func() bool {
		ranks = ranks[:0]
		for _, p := range childrenOf(cmd.Process.Pid) {
			if b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", p)); strings.TrimSpace(string(b)) == "sleep" {
				ranks = append(ranks, p)
			}
		}
		return len(ranks) == 2
	})
	all := func(want bool) func() bool {
		return func() bool { return allStopped(want, append([]int{cmd.Process.Pid}, ranks...)) }
	}
	cmd.Process.Signal(syscall.SIGTSTP)
	waitFor("stopped by SIGTSTP", all(true))
	cmd.Process.Signal(syscall.SIGCONT)
	waitFor("continued by SIGCONT", all(false))
}

// TestStopLines: gorun says when it kills ranks that outlived the kill
// grace, and when a job's restarts are used up; both happened silently.
func TestStopLines(t *testing.T) {
	r := gorun(t, "", "-q", "--timeout", "500ms", "--kill-grace", "200ms", "-np", "1", "sh", "-c", `trap "" TERM; while :; do sleep 0.05; done`)
	if want := "gorun: the running rank did not end within the kill grace of 200ms (--kill-grace): killing it (SIGKILL)"; r.code != 124 || !strings.Contains(r.stderr, want) {
		t.Errorf("want status 124 and %q\n%v", want, r)
	}
	r = gorun(t, "", "-q", "--max-restarts", "1", "-np", "1", "sh", "-c", "exit 3")
	if want := "gorun: no restart left: the job failed in each of its 2 starts (--max-restarts 1)"; r.code != 3 || !strings.Contains(r.stderr, want) {
		t.Errorf("want status 3 and %q\n%v", want, r)
	}
}
