package slurmtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gorun-hpc/gorun/spmd/launch/testhost"
)

// The end-to-end tests of gorun inside a Slurm allocation. TestMain builds
// gorun, examples/hello and testdata/slurmprobe into bin.

// jobTimeout bounds every salloc and sbatch of these tests.
const jobTimeout = 2 * time.Minute

// bin holds the programs TestMain built, or why it could not build them.
var bin struct {
	gorun, hello, probe string
	err                 error
}

func TestMain(m *testing.M) {
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	if os.Geteuid() == 0 { // otherwise every rig skips: do not spend the build
		dir, err := os.MkdirTemp("", "gorun-slurme2e-")
		if err != nil {
			bin.err = err
		} else {
			defer os.RemoveAll(dir)
			if err := os.Chmod(dir, 0o755); err != nil {
				bin.err = err
			}
			bin.gorun, bin.hello, bin.probe = filepath.Join(dir, "gorun"), filepath.Join(dir, "hello"), filepath.Join(dir, "slurmprobe")
			bin.err = errors.Join(bin.err,
				build(bin.gorun, "github.com/gorun-hpc/gorun/cmd/gorun"),
				build(bin.hello, "github.com/gorun-hpc/gorun/examples/hello"),
				build(bin.probe, "./testdata/slurmprobe"))
		}
	}
	return m.Run()
}

func build(out, pkg string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	b, err := exec.CommandContext(ctx, "go", "build", "-o", out, pkg).CombinedOutput()
	if err != nil {
		return fmt.Errorf("go build %s: %v\n%s", pkg, err, b)
	}
	return nil
}

// job is the outcome of one command run against the cluster.
type job struct {
	args           []string
	code           int // exit status; -1 if it did not exit
	stdout, stderr string
	err            error // set when it did not run or timed out
}

func (j job) String() string {
	return fmt.Sprintf("%s: status %d, err %v\nstdout:\n%s\nstderr:\n%s", strings.Join(j.args, " "), j.code, j.err, j.stdout, j.stderr)
}

// runJob runs args against the cluster, killing its process group after
// jobTimeout.
func runJob(c *Cluster, args ...string) job {
	ctx, cancel := context.WithTimeout(context.Background(), jobTimeout)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := c.CommandContext(ctx, args[0], args[1:]...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	j := job{args: args, code: -1, stdout: stdout.String(), stderr: stderr.String()}
	if cmd.ProcessState != nil {
		j.code = cmd.ProcessState.ExitCode()
	}
	var exit *exec.ExitError
	if ctx.Err() != nil {
		j.err = fmt.Errorf("timed out after %v: %w", jobTimeout, ctx.Err())
	} else if err != nil && !errors.As(err, &exit) {
		j.err = err
	}
	return j
}

// TestGorun runs gorun jobs in a three-node allocation: salloc -N3 -n6
// gives 2(x3) tasks per node, so the six ranks go two to each of n1..n3.
func TestGorun(t *testing.T) {
	c := New(t, 3)
	if bin.err != nil {
		t.Fatalf("building the programs: %v", bin.err)
	}
	t.Run("DryRun", func(t *testing.T) { testDryRun(t, c) })
	t.Run("Hello", func(t *testing.T) { testHello(t, c) }) // no -np: one rank per task Slurm allotted
	t.Run("HelloNP", func(t *testing.T) { testHello(t, c, "-np", "6") })
	t.Run("Placement", func(t *testing.T) { testPlacement(t, c) })
	t.Run("Sbatch", func(t *testing.T) { testSbatch(t, c) })
	t.Run("StepOfOne", func(t *testing.T) { testStepOfOne(t, c) })
	t.Run("RankKilled", func(t *testing.T) { testRankKilled(t, c) })
	t.Run("AgentFrozen", func(t *testing.T) { testAgentFrozen(t, c) })
}

// testAgentFrozen freezes the agent on n2 while the job runs. srun, which
// carries the agents' links, has no keepalive of its own: after
// --agent-timeout without one from that agent, gorun gives n2 up and
// stops the job with 255, naming it. It waited for the job's end, which
// never came.
func testAgentFrozen(t *testing.T, c *Cluster) {
	ctx, cancel := context.WithTimeout(context.Background(), jobTimeout)
	defer cancel()
	var stdout, stderr testhost.SyncBuffer
	cmd := c.CommandContext(ctx, "salloc", "-N3", "-n6", bin.gorun, "--agent-timeout", "3s", "-np", "6", "sleep", "300")
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	agent := 0
	for deadline := time.Now().Add(time.Minute); agent == 0; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) { // a guard against a hang, not a timing
			t.Fatalf("no agent of gorun on n2 with its ranks; stderr:\n%s", stderr.String())
		}
		agent = agentWithRanks(c, "n2", 2)
	}
	syscall.Kill(agent, syscall.SIGSTOP)
	defer syscall.Kill(agent, syscall.SIGCONT)
	err := cmd.Wait()
	code := -1
	if cmd.ProcessState != nil {
		code = cmd.ProcessState.ExitCode()
	}
	if code != 255 {
		t.Errorf("salloc gorun exited %d (%v), want 255 for the lost node\n%s", code, err, stderr.String())
	}
	want := regexp.MustCompile(`(?m)^gorun: host n2: connection to its agent lost \(its agent silent for [0-9.]+s, past --agent-timeout 3s`)
	if !want.MatchString(stderr.String()) {
		t.Errorf("stderr lacks %v:\n%s", want, stderr.String())
	}
	syscall.Kill(agent, syscall.SIGCONT)
	if left := waitGone(20*time.Second, c.Pids); len(left) > 0 {
		t.Errorf("processes of the job left: %s", psLines(left))
	}
}

// agentWithRanks returns the pid of the gorun agent that Slurm runs on
// node, once it has started n ranks; 0 before.
func agentWithRanks(c *Cluster, node string, n int) int {
	ps := procs()
	for _, p := range ps {
		cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p.pid))
		args := strings.Split(string(cmdline), "\x00")
		if len(args) < 2 || args[0] != bin.gorun || args[1] != "--agent" || !c.ownConf(p.conf) {
			continue
		}
		env, _ := os.ReadFile(fmt.Sprintf("/proc/%d/environ", p.pid))
		if envValue(env, "SLURMD_NODENAME") != node {
			continue
		}
		children := 0
		for _, q := range ps {
			if q.ppid == p.pid {
				children++
			}
		}
		if children >= n {
			return p.pid
		}
	}
	return 0
}

var planLine = regexp.MustCompile(`(?m)^rank (\d+): host (\S+), node (\d+), local rank (\d+)$`)

// testDryRun checks gorun's plan inside the allocation, without -np: the
// hosts are the Slurm nodes, one rank per task Slurm gave each.
func testDryRun(t *testing.T, c *Cluster) {
	j := runJob(c, "salloc", "-N3", "-n6", bin.gorun, "--dry-run", bin.probe)
	if j.err != nil || j.code != 0 {
		t.Fatalf("want status 0\n%v", j)
	}
	ranks := planLine.FindAllStringSubmatch(j.stdout, -1)
	if len(ranks) != 6 {
		t.Fatalf("plan has %d ranks; want 6\n%v", len(ranks), j)
	}
	for _, m := range ranks {
		r, _ := strconv.Atoi(m[1])
		want := fmt.Sprintf("host n%d, node %d, local rank %d", r/2+1, r/2, r%2)
		if got := fmt.Sprintf("host %s, node %s, local rank %s", m[2], m[3], m[4]); got != want {
			t.Errorf("rank %d: %s; want %s", r, got, want)
		}
	}
}

var helloLine = regexp.MustCompile(`(?m)^rank (\d+) of (\d+) on (\S+) \(local rank (\d+)\)$`)

// testHello runs examples/hello in the allocation with gorun's flags.
func testHello(t *testing.T, c *Cluster, flags ...string) {
	args := append(append([]string{"salloc", "-N3", "-n6", bin.gorun}, flags...), bin.hello)
	j := runJob(c, args...)
	if j.err != nil || j.code != 0 {
		t.Fatalf("want status 0\n%v", j)
	}
	seen := map[int]bool{}
	for _, m := range helloLine.FindAllStringSubmatch(j.stdout, -1) {
		r, _ := strconv.Atoi(m[1])
		if seen[r] || m[2] != "6" || m[4] != strconv.Itoa(r%2) {
			t.Errorf("line %q: want each rank once, of 6, local rank %d", m[0], r%2)
		}
		seen[r] = true
	}
	if len(seen) != 6 {
		t.Errorf("%d ranks said hello; want 6\n%v", len(seen), j)
	}
}

// testPlacement runs the probe: each rank reports the Slurm node it runs on
// and the host identity gorun gave it.
func testPlacement(t *testing.T, c *Cluster) {
	j := runJob(c, "salloc", "-N3", "-n6", bin.gorun, "-np", "6", bin.probe)
	if j.err != nil || j.code != 0 {
		t.Fatalf("want status 0\n%v", j)
	}
	checkPlacement(t, j)
}

// testStepOfOne runs gorun as the one task of a step, srun -n1 gorun, as
// people run srun -n1 mpirun: it places the ranks on the job's three
// nodes, two per node with --npernode, and says so. It refused the job:
// the step's SLURM_TASKS_PER_NODE (1) gave one node's count for three.
func testStepOfOne(t *testing.T, c *Cluster) {
	j := runJob(c, "salloc", "-N3", "-n6", "srun", "-n1", bin.gorun, "-np", "6", "--npernode", "2", bin.probe)
	if j.err != nil || j.code != 0 {
		t.Fatalf("want status 0\n%v", j)
	}
	checkPlacement(t, j)
	if want := "placing ranks on the job's allocation"; !strings.Contains(j.stderr, want) {
		t.Errorf("stderr lacks %q\n%v", want, j)
	}
}

var probeLine = regexp.MustCompile(`(?m)^rank (\d+) of 6 node (\S*) host (\S*) local (\d+) of (\d+) noderank (\d+)$`)

// checkPlacement checks the probe's lines: rank r on node n(r/2+1), local
// rank r%2 of 2, node rank r/2, and one host id per node, different on
// each.
func checkPlacement(t *testing.T, j job) {
	t.Helper()
	lines := probeLine.FindAllStringSubmatch(j.stdout, -1)
	if len(lines) != 6 {
		t.Fatalf("%d ranks reported; want 6\n%v", len(lines), j)
	}
	idOf := map[string]string{}   // node -> host id
	nodeOf := map[string]string{} // host id -> node
	for _, m := range lines {
		r, _ := strconv.Atoi(m[1])
		node, id := m[2], m[3]
		want := fmt.Sprintf("node n%d local %d of 2 noderank %d", r/2+1, r%2, r/2)
		if got := fmt.Sprintf("node %s local %s of %s noderank %s", node, m[4], m[5], m[6]); got != want {
			t.Errorf("rank %d: %s; want %s", r, got, want)
		}
		if id == "" {
			t.Errorf("rank %d on %s has no GORUN_HOST_ID", r, node)
		}
		if prev, ok := idOf[node]; ok && prev != id {
			t.Errorf("node %s has host ids %q and %q; want one", node, prev, id)
		}
		if prev, ok := nodeOf[id]; ok && prev != node {
			t.Errorf("host id %q on nodes %s and %s; want one id per node", id, prev, node)
		}
		idOf[node], nodeOf[id] = id, node
	}
}

// testSbatch runs gorun with 6 ranks from a batch script.
func testSbatch(t *testing.T, c *Cluster) {
	script := filepath.Join(c.Dir, "gorun-job.sh")
	body := fmt.Sprintf("#!/bin/sh\nexec %s -np 6 %s\n", bin.gorun, bin.probe)
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(c.Dir, "gorun-job.out")
	j := runJob(c, "sbatch", "--wait", "-N3", "-n6", "-o", out, script)
	b, err := os.ReadFile(out)
	j.stdout += "\n" + out + ":\n" + string(b)
	if j.err != nil || j.code != 0 || err != nil {
		t.Fatalf("want status 0 and an output file (%v)\n%v", err, j)
	}
	j.stdout = string(b)
	checkPlacement(t, j)
}

// testRankKilled has the rank on n2 with local rank 0 (rank 2) kill itself
// once all have arrived: the job must end with its status and leave no
// process behind on any node.
func testRankKilled(t *testing.T, c *Cluster) {
	start := time.Now()
	j := runJob(c, "salloc", "-N3", "-n6", bin.gorun, "-np", "6", "-x", "SLURMPROBE_DIE_ON=n2", bin.probe)
	t.Logf("job ended in %v with status %d; its stderr:\n%s", time.Since(start).Round(time.Millisecond), j.code, j.stderr)
	if j.err != nil || j.code == 0 {
		t.Errorf("want a non-zero status\n%v", j)
	} else if j.code != 137 {
		t.Errorf("want status 137 (the killed rank's 128+9)\n%v", j)
	}
	checkPlacement(t, j) // every rank arrived, where it should, before rank 2 died
	if !regexp.MustCompile(`(?m)^gorun: rank 2 .*signal 9`).MatchString(j.stderr) {
		t.Errorf("no line naming rank 2 as killed by signal 9\n%v", j)
	}
	if left := waitGone(10*time.Second, func() []int { return programPids(bin.probe) }); len(left) > 0 {
		t.Errorf("%d %s processes left after the job: %s", len(left), filepath.Base(bin.probe), psLines(left))
	}
	if left := waitGone(10*time.Second, c.Pids); len(left) > 0 {
		t.Errorf("processes of the job left: %s", psLines(left))
	}
}

// waitGone polls list until it is empty or timeout passes, and returns its
// last result.
func waitGone(timeout time.Duration, list func() []int) []int {
	deadline := time.Now().Add(timeout)
	for {
		pids := list()
		if len(pids) == 0 || time.Now().After(deadline) {
			return pids
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// programPids lists the live processes running the program at path.
func programPids(path string) []int {
	var pids []int
	for _, p := range procs() {
		if exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", p.pid)); err == nil && exe == path && testhost.Alive(p.pid) {
			pids = append(pids, p.pid)
		}
	}
	return pids
}

// psLines describes processes as ps does, for a failure message.
func psLines(pids []int) string {
	var b strings.Builder
	for _, pid := range pids {
		cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		fmt.Fprintf(&b, "\n  %d %s", pid, bytes.ReplaceAll(bytes.TrimRight(cmdline, "\x00"), []byte{0}, []byte{' '}))
	}
	return b.String()
}
