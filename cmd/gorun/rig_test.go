package main

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gorun-hpc/gorun/prims"
	"github.com/gorun-hpc/gorun/spmd/contract"
	"github.com/gorun-hpc/gorun/spmd/launch/netnstest"
)

// Multi-host tests: gorun across the network-namespace hosts of a
// netnstest rig, each with its own sshd. They need root and skip otherwise.
// One rig serves all the subtests of a test.

// rigArgs are the flags that make gorun reach the rig's hosts.
func rigArgs(r *netnstest.Rig) []string {
	return []string{"--ssh-args", "-F " + r.SSHConfig}
}

// buildHello builds examples/hello once per test binary.
var helloOnce struct {
	sync.Once
	path string
	err  error
}

func helloBin(t *testing.T) string {
	helloOnce.Do(func() {
		helloOnce.path = filepath.Join(filepath.Dir(gorunBin), "hello")
		out, err := exec.Command("go", "build", "-o", helloOnce.path, "../../examples/hello").CombinedOutput()
		if err != nil {
			helloOnce.err = fmt.Errorf("building hello: %v\n%s", err, out)
		}
	})
	if helloOnce.err != nil {
		t.Fatal(helloOnce.err)
	}
	return helloOnce.path
}

var helloLine = regexp.MustCompile(`^rank (\d+) of (\d+) on (\S+) \(local rank (\d+)\)$`)

// helloHosts runs hello with args and returns the host of each rank.
func helloHosts(t *testing.T, np int, args ...string) []string {
	t.Helper()
	r := gorun(t, "", append(args, "-np", fmt.Sprint(np), helloBin(t))...)
	if r.code != 0 {
		t.Fatal(r)
	}
	got := make([]string, np)
	for _, l := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		m := helloLine.FindStringSubmatch(l)
		if m == nil {
			t.Fatalf("unexpected line %q\n%s", l, r)
		}
		var rank int
		fmt.Sscan(m[1], &rank)
		if m[2] != fmt.Sprint(np) || rank >= np || got[rank] != "" {
			t.Fatalf("bad or repeated line %q\n%s", l, r)
		}
		got[rank] = m[3]
	}
	for i, h := range got {
		if h == "" {
			t.Fatalf("rank %d did not report\n%s", i, r)
		}
	}
	return got
}

// TestRig runs every multi-host case on one rig of four hosts; hostfile3
// lists the first three.
func TestRig(t *testing.T) {
	rig := netnstest.New(t, 4)
	hf3 := filepath.Join(t.TempDir(), "hostfile3")
	if err := os.WriteFile(hf3, []byte("h1 slots=2\nh2 slots=2\nh3 slots=2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	base := append(rigArgs(rig), "--hostfile", hf3)
	t.Run("hello by slot", func(t *testing.T) {
		got := helloHosts(t, 6, base...)
		want := []string{"h1", "h1", "h2", "h2", "h3", "h3"}
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("ranks ran on %v, want %v", got, want)
		}
	})
	t.Run("hello by node", func(t *testing.T) {
		got := helloHosts(t, 6, append(base, "--map-by", "node")...)
		want := []string{"h1", "h2", "h3", "h1", "h2", "h3"}
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("ranks ran on %v, want %v", got, want)
		}
	})
	t.Run("-H", func(t *testing.T) {
		got := helloHosts(t, 3, append(rigArgs(rig), "-H", "h3:1,h1:2")...)
		want := []string{"h3", "h1", "h1"}
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("ranks ran on %v, want %v", got, want)
		}
	})
	t.Run("launch agent", func(t *testing.T) {
		got := helloHosts(t, 2, "--launch-agent", "ssh -F "+rig.SSHConfig+" -o BatchMode=yes", "-H", "h4:2")
		if strings.Join(got, " ") != "h4 h4" {
			t.Errorf("ranks ran on %v, want h4 h4", got)
		}
	})
	t.Run("stdin and output dir", func(t *testing.T) {
		dir := t.TempDir()
		r := gorun(t, "one\ntwo\n", append(rigArgs(rig), "-H", "h2:1,h3:1", "--stdin", "1", "--output-dir", dir,
			"-np", "2", "sh", "-c", `echo "$GORUN_RANK read $(cat | tr '\n' ' ')"`)...)
		if r.code != 0 || strings.Join(lines(r.stdout), ",") != "0 read ,1 read one two " {
			t.Fatal(r)
		}
		if b, err := os.ReadFile(filepath.Join(dir, "rank.1.out")); err != nil || string(b) != "1 read one two \n" {
			t.Errorf("rank.1.out = %q, %v", b, err)
		}
	})
	t.Run("bind-to through the agents", func(t *testing.T) {
		// The rig's hosts share this machine's CPUs: 2 ranks on each of 2
		// hosts, bound by their host's agent, take its first two hardware
		// threads.
		var set unix.CPUSet
		if err := unix.SchedGetaffinity(0, &set); err != nil || set.Count() < 2 {
			t.Skipf("binding needs 2 CPUs (%d, %v)", set.Count(), err)
		}
		var cpus []int
		for c := 0; len(cpus) < 2; c++ {
			if set.IsSet(c) {
				cpus = append(cpus, c)
			}
		}
		r := gorun(t, "", append(rigArgs(rig), "-H", "h1:2,h2:2", "--bind-to", "hwthread",
			"--report-bindings", "-np", "4", "sh", "-c", `echo "$GORUN_RANK $(grep Cpus_allowed_list /proc/self/status | cut -f2)"`)...)
		if r.code != 0 {
			t.Fatal(r)
		}
		got := lines(r.stdout)
		sort.Strings(got)
		want := fmt.Sprintf("0 %d,1 %d,2 %d,3 %d", cpus[0], cpus[1], cpus[0], cpus[1])
		if strings.Join(got, ",") != want {
			t.Errorf("ranks and their cpus %v, want %s\n%s", got, want, r)
		}
		if n := strings.Count(r.stderr, ": hwthread "); n != 4 {
			t.Errorf("%d bindings reported, want 4\n%s", n, r.stderr)
		}
	})
	t.Run("net and ports", func(t *testing.T) { testRigNetPorts(t, rig, base) })
	t.Run("net not here", func(t *testing.T) { testRigNetNotHere(t, rig) })
	t.Run("collbench", func(t *testing.T) { testRigCollbench(t, base) })
	t.Run("topo", func(t *testing.T) { testRigTopo(t, base) })
	t.Run("tune", func(t *testing.T) { testRigTune(t, rigArgs(rig)) })
	t.Run("remote rank killed", func(t *testing.T) { testRigKilled(t, rig, base) })
	t.Run("sigint", func(t *testing.T) { testRigSigint(t, rig, base) })
	t.Run("ssh dies", func(t *testing.T) { testRigSSHDies(t, rig, base) })
	t.Run("tree", func(t *testing.T) { testRigTree(t, rig) })
	t.Run("preload", func(t *testing.T) { testRigPreload(t, rig) })
	t.Run("preload programs of one name", func(t *testing.T) { testRigPreloadSameName(t, rig) })
	t.Run("built package", func(t *testing.T) { testRigBuilt(t, rig) })
	t.Run("unreachable", func(t *testing.T) { testRigUnreachable(t, rig) })
	t.Run("mpmd", func(t *testing.T) { testRigMPMD(t, base) })
	t.Run("agent killed", func(t *testing.T) { testRigAgentKilled(t, rig) })
	t.Run("frozen agent", func(t *testing.T) { testRigFrozenAgent(t, rig) })
	t.Run("frozen while running", func(t *testing.T) { testRigFrozenWhileRunning(t, rig) })
	t.Run("partition at stop", func(t *testing.T) { testRigPartitionAtStop(t, rig) })
	t.Run("partition while running", func(t *testing.T) { testRigPartitionWhileRunning(t, rig) })
	t.Run("partition blame", func(t *testing.T) { testRigPartitionBlame(t, rig) })
	t.Run("ctrl-z", func(t *testing.T) { testRigCtrlZ(t, rig) })
	t.Run("tree lost", func(t *testing.T) { testRigTreeLost(t, rig) })
	checkNoLeftovers(t, rig)
}

// testRigMPMD runs an MPMD job across the three hosts: a server program
// on h1 and five workers after it, which send it their numbers.
func testRigMPMD(t *testing.T, base []string) {
	dir := t.TempDir()
	for _, p := range []string{"server", "worker"} {
		if out, err := exec.Command("go", "build", "-o", filepath.Join(dir, p), "./testdata/mpmd/"+p).CombinedOutput(); err != nil {
			t.Fatalf("building %s: %v\n%s", p, err, out)
		}
	}
	args := append(append([]string{}, base...), filepath.Join(dir, "server"), ":", "-np", "5", "-x", "ROLE=worker", filepath.Join(dir, "worker"))
	args = append([]string{"-np", "1"}, args...)
	r := gorun(t, "", args...)
	if r.code != 0 || !strings.Contains(r.stdout, "server: rank 0 of 6 got 150 from the workers") || strings.Count(r.stdout, ", role worker\n") != 5 {
		t.Errorf("want the server to get 10+...+50 from 5 workers across the hosts\n%v", r)
	}
}

// testRigNetPorts picks addresses by --net and keeps every listener of the
// job (seed, gossip, data plane) in --ports.
func testRigNetPorts(t *testing.T, rig *netnstest.Rig, base []string) {
	const lo, hi = 41000, 41063
	args := append(append([]string{}, base...), "--net", rig.Subnet, "--ports", fmt.Sprintf("%d-%d", lo, hi), "--verbose",
		"-np", "6", helloBin(t))
	r := gorun(t, "", args...)
	if r.code != 0 {
		t.Fatal(r)
	}
	subnet := netip.MustParsePrefix(rig.Subnet)
	listen := regexp.MustCompile(`listening on (\S+):(\d+)`)
	found := listen.FindAllStringSubmatch(r.stderr, -1)
	if len(found) < 1+2*6 { // the seed, and each rank's gossip and data plane
		t.Fatalf("%d listeners logged, want at least 13:\n%s", len(found), r.stderr)
	}
	for _, m := range found {
		var port int
		fmt.Sscan(m[2], &port)
		ip, err := netip.ParseAddr(m[1])
		if err != nil || !subnet.Contains(ip) || port < lo || port > hi {
			t.Errorf("a listener on %s:%s, want one in %s, ports %d-%d", m[1], m[2], rig.Subnet, lo, hi)
		}
	}
}

// testRigNetNotHere gives a --net that only h1 has an address in (its
// own, a /32). The launcher has none in it, and listens on its address
// facing the hosts instead, with a line saying so (it listened on
// 127.0.0.1, and the ranks waited for it until their init timeout); h2
// has none either, and the job stops before it starts, naming the host,
// the flag and the host's addresses (status 2).
func testRigNetNotHere(t *testing.T, rig *netnstest.Rig) {
	h1, h2 := rig.Hosts[0], rig.Hosts[1]
	only := h1.Addr + "/32"
	args := append(rigArgs(rig), "--net", only, "--init-timeout", "10s")
	r := gorun(t, "", append(args, "-H", "h1:2", "-np", "2", helloBin(t))...)
	want := fmt.Sprintf("gorun: --net %s: no local address in it (have ", only)
	said := fmt.Sprintf("; the launcher listens on %s instead, its address that routes to host h1, as without --net (the hosts still choose theirs by --net)\n", rig.BridgeAddr)
	if r.code != 0 || !strings.Contains(r.stderr, want) || !strings.Contains(r.stderr, said) {
		t.Errorf("want status 0 and the line %q...%q\n%s", want, said, r)
	}
	r = gorun(t, "", append(args, "-H", "h1:1,h2:1", "-np", "2", helloBin(t))...)
	want = fmt.Sprintf("gorun: host h2: --net %s: no local address in it (have ", only)
	if r.code != 2 || !strings.Contains(r.stderr, want) || !strings.Contains(r.stderr, h2.Addr+"/24") || strings.Contains(r.stdout, "rank") {
		t.Errorf("want status 2, no rank started, and a line %q naming h2's address %s\n%s", want, h2.Addr, r)
	}
	// --iface lo is there everywhere, but no other host reaches it: the
	// launcher's seed goes to its routed address, and the hosts refuse.
	r = gorun(t, "", append(rigArgs(rig), "--iface", "lo", "--init-timeout", "10s", "-H", "h1:1,h2:1", "-np", "2", helloBin(t))...)
	said = "gorun: --iface lo: 127.0.0.1 is a loopback address, which no other host reaches (have lo 127.0.0.1/8"
	want = "gorun: host h[12]: --iface lo: 127\\.0\\.0\\.1 is a loopback address, which no other host reaches \\(have lo 127\\.0\\.0\\.1/8" // the first to answer
	if r.code != 2 || !strings.Contains(r.stderr, said) || !regexp.MustCompile(want).MatchString(r.stderr) || strings.Contains(r.stdout, "rank") {
		t.Errorf("want status 2, no rank started, and the lines %q and %q\n%s", said, want, r)
	}
}

// testRigCollbench checks every collective across hosts with collbench's
// reference check, with the algorithm topo chooses and with the
// hierarchical one forced, which the three hosts of two ranks each allow.
func testRigCollbench(t *testing.T, base []string) {
	bin := filepath.Join(t.TempDir(), "collbench")
	if out, err := exec.Command("go", "build", "-o", bin, "../../examples/collbench").CombinedOutput(); err != nil {
		t.Fatalf("building examples/collbench: %v\n%s", err, out)
	}
	for _, extra := range [][]string{{"--op", "all"}, {"--op", "allreduce", "--algo", "hier"}, {"--op", "broadcast", "--algo", "hier"}} {
		args := append(append([]string{}, base...), "-np", "6", bin, "-c", "1", "-b", "8", "-e", "256K", "-f", "8", "-n", "2", "-w", "1")
		r := gorun(t, "", append(args, extra...)...)
		if r.code != 0 {
			t.Fatalf("collbench %v:\n%s", extra, r)
		}
		rows := 0
		for _, l := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
			if f := strings.Fields(l); len(f) > 0 && !strings.HasPrefix(l, "#") {
				rows++
				if f[len(f)-1] != "0" {
					t.Errorf("collbench %v: wrong elements: %s", extra, l)
				}
			}
		}
		if rows == 0 {
			t.Errorf("collbench %v printed no results:\n%s", extra, r)
		}
	}
}

// testRigTopo: gorun --topo across the rig shows every host, apart though
// they share the launcher's hostname-independent ids, and measures the
// other-host link.
func testRigTopo(t *testing.T, base []string) {
	r := gorun(t, "", append(append([]string{}, base...), "--topo", "-np", "6")...)
	if r.code != 0 {
		t.Fatal(r)
	}
	for _, want := range []string{"# 6 ranks on 3 hosts", "h1", "h2", "h3", "other host"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("--topo report lacks %q:\n%s", want, r)
		}
	}
}

// testRigTune: gorun --tune across hosts writes the table of their key
// (hosts, ranks on each, shared memory within and TCP across) on rank 0's
// host, and a later job there follows it.
func testRigTune(t *testing.T, rigArgs []string) {
	path := filepath.Join(t.TempDir(), "tune.toml")
	env := []string{"-x", contract.EnvTuneFile + "=" + path}
	// Three ranks on two hosts and one size: every collective's
	// algorithms, hierarchical ones included, timed across hosts (6 ranks
	// on 3 took minutes on 2 cores).
	job := append(append(append([]string{}, rigArgs...), "-H", "h1:2,h2:1", "-np", "3"), env...)
	report := filepath.Join(t.TempDir(), "tune.json")
	r := gorun(t, "", append(job, "--tune", "--tune-sizes", "64", "--tune-json", report)...)
	if r.code != 0 || !strings.Contains(r.stdout, "written to "+path) {
		t.Fatal(r)
	}
	if rep := readTuneReport(t, report); !slices.Equal(rep.RankHosts, []string{"h1", "h1", "h2"}) || rep.SharedMemory || rep.Key.Transport != "shm+tcp" {
		t.Errorf("report of 3 ranks on h1 and h2: rank_hosts %v, shared memory %v, key %v", rep.RankHosts, rep.SharedMemory, rep.Key)
	}
	f, err := prims.ReadTuneFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want := prims.TuneKey{Hosts: []string{"h1", "h2"}, PerHost: []int{2, 1}, Transport: "shm+tcp"}
	if len(f.Tables) != 1 || !f.Tables[0].TuneKey.Equal(want) || len(f.Tables[0].Rules) == 0 {
		t.Fatalf("%s holds %+v, want one table of %v", path, f.Tables, want)
	}
	r = gorun(t, "", append(job, "--topo")...)
	if r.code != 0 || !strings.Contains(r.stdout, "(table)") || !strings.Contains(r.stdout, "decision table: "+path) {
		t.Fatalf("gorun --topo after --tune shows no choice from the table:\n%s", r)
	}
}

// rankScript records "rank pid" in pidfile and sleeps.
func rankScript(pidfile string) string {
	return `echo "$GORUN_RANK $$" >> ` + pidfile + `; exec sleep 300`
}

// startSleepers starts 6 sleeping ranks over hostfile3 and returns the
// command, its stderr and the pid of each rank.
func startSleepers(t *testing.T, base []string, extra ...string) (*exec.Cmd, *syncBuffer, map[int]int) {
	t.Helper()
	pidfile := filepath.Join(t.TempDir(), "pids")
	args := append(append(append([]string{}, base...), extra...), "-np", "6", "--kill-grace", "2s", "sh", "-c", rankScript(pidfile))
	cmd := gorunCmd(t, args...)
	var stderr syncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	flat := waitPids(t, pidfile, 12)
	pids := map[int]int{}
	for i := 0; i+1 < len(flat); i += 2 {
		pids[flat[i]] = flat[i+1]
	}
	return cmd, &stderr, pids
}

func exitCodeOf(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}

func testRigKilled(t *testing.T, rig *netnstest.Rig, base []string) {
	cmd, stderr, pids := startSleepers(t, base)
	syscall.Kill(pids[4], syscall.SIGKILL)
	err := cmd.Wait()
	if code := exitCodeOf(err); code != 137 {
		t.Errorf("gorun exited %d, want 137\n%s", code, stderr.String())
	}
	want := fmt.Sprintf("gorun: rank 4 (pid %d on h3) was killed by signal 9 (killed); stopping the other ranks\n", pids[4])
	if !strings.Contains(stderr.String(), want) {
		t.Errorf("stderr lacks %q:\n%s", want, stderr.String())
	}
	checkNoLeftovers(t, rig)
}

func testRigSigint(t *testing.T, rig *netnstest.Rig, base []string) {
	cmd, stderr, _ := startSleepers(t, base)
	cmd.Process.Signal(syscall.SIGINT)
	err := cmd.Wait()
	if code := exitCodeOf(err); code != 130 {
		t.Errorf("gorun exited %d, want 130\n%s", code, stderr.String())
	}
	checkNoLeftovers(t, rig)
}

// testRigSSHDies kills the ssh that carries h2's agent: the job stops with
// one line naming the host.
func testRigSSHDies(t *testing.T, rig *netnstest.Rig, base []string) {
	cmd, stderr, _ := startSleepers(t, base)
	ssh := childSSH(t, cmd.Process.Pid, "h2")
	syscall.Kill(ssh, syscall.SIGKILL)
	err := cmd.Wait()
	if code := exitCodeOf(err); code != 255 {
		t.Errorf("gorun exited %d, want 255\n%s", code, stderr.String())
	}
	want := "gorun: host h2: connection to its agent lost (ssh was killed by signal 9 (killed)"
	if !strings.Contains(stderr.String(), want) || strings.Count(stderr.String(), "gorun: host h2") != 1 {
		t.Errorf("stderr lacks one %q:\n%s", want, stderr.String())
	}
	checkNoLeftovers(t, rig)
}

// childSSH finds the ssh child of pid whose command line names host.
func childSSH(t *testing.T, pid int, host string) int {
	t.Helper()
	files, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	var kids []string
	for _, f := range files {
		b, _ := os.ReadFile(f)
		kids = append(kids, strings.Fields(string(b))...)
	}
	for _, f := range kids {
		var c int
		fmt.Sscan(f, &c)
		line, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", c))
		args := strings.Split(string(line), "\x00")
		if len(args) > 0 && filepath.Base(args[0]) == "ssh" && contains(args, host) {
			return c
		}
	}
	t.Fatalf("no ssh child of %d for %s", pid, host)
	return 0
}

func contains(xs []string, x string) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

var agentLine = regexp.MustCompile(`gorun: (?:[0-9:.]+ )?host (h\d): agent pid \d+ on (h\d), started by (the launcher|agent h\d), ssh from (\S+)`)

// testRigTree starts agents on four hosts two at a time: the launcher
// starts h1 and h3, which start h2 and h4.
func testRigTree(t *testing.T, rig *netnstest.Rig) {
	args := append(rigArgs(rig), "--hostfile", rig.Hostfile, "--spawn-radix", "2", "--verbose",
		"--npernode", "1", "-np", "4", "sh", "-c", "echo $GORUN_RANK $GORUN_HOST_ID $MASTER_ADDR")
	r := gorun(t, "", args...)
	if r.code != 0 {
		t.Fatal(r)
	}
	addr := map[string]string{}
	for _, h := range rig.Hosts {
		addr[h.Name] = h.Addr
	}
	want := map[string]string{"h1": "the launcher", "h2": "agent h1", "h3": "the launcher", "h4": "agent h3"}
	got := map[string]string{}
	for _, m := range agentLine.FindAllStringSubmatch(r.stderr, -1) {
		host, hostname, by, from := m[1], m[2], m[3], m[4]
		got[host] = by
		if hostname != host {
			t.Errorf("agent of %s runs on %s", host, hostname)
		}
		if parent, ok := strings.CutPrefix(by, "agent "); ok && from != addr[parent] {
			t.Errorf("agent of %s says it was started by %s, but its ssh came from %s, not %s", host, parent, from, addr[parent])
		}
	}
	for h, by := range want {
		if got[h] != by {
			t.Errorf("agent of %s started by %q, want %q\n%s", h, got[h], by, r.stderr)
		}
	}
	// Host ids from the host list; MASTER_ADDR is rank 0's host.
	a := addr["h1"]
	if l := lines(r.stdout); strings.Join(l, ",") != "0 h1 "+a+",1 h2 "+a+",2 h3 "+a+",3 h4 "+a {
		t.Errorf("ranks said %q", l)
	}
}

// testRigPreload runs a script copied to each host with gorun itself.
func testRigPreload(t *testing.T, rig *netnstest.Rig) {
	script := filepath.Join(t.TempDir(), "where.sh")
	os.WriteFile(script, []byte("#!/bin/sh\necho \"$GORUN_RANK $0 $(readlink /proc/$PPID/exe)\"\n"), 0o755)
	before, _ := filepath.Glob(filepath.Join(os.TempDir(), "gorun-preload-*"))
	// Radix 1: the agent on h1 preloads to h2 from its own copy.
	r := gorun(t, "", append(rigArgs(rig), "-H", "h1:1,h2:1", "--preload", "--spawn-radix", "1", "-np", "2", script)...)
	if r.code != 0 {
		t.Fatal(r)
	}
	pre := regexp.MustCompile(`^\d (/\S+/gorun-preload-\w+)/1/where\.sh (/\S+/gorun-preload-\w+)/gorun$`)
	dirs := map[string]bool{}
	for _, l := range lines(r.stdout) {
		m := pre.FindStringSubmatch(l)
		if m == nil || m[1] != m[2] {
			t.Errorf("rank ran %q, not the preloaded script from a preloaded gorun", l)
			continue
		}
		dirs[m[1]] = true
	}
	if len(dirs) != 2 {
		t.Errorf("want one preload directory per host, got %v", dirs)
	}
	after, _ := filepath.Glob(filepath.Join(os.TempDir(), "gorun-preload-*"))
	if len(after) > len(before) {
		t.Errorf("preload directories left: %v", after)
	}
}

// testRigPreloadSameName preloads an MPMD job's two programs of one base
// name from different directories: each rank runs its own program's copy
// (the second was copied over the first, and every rank ran it), on h1
// and on h2, which h1's agent preloads from its own copies.
func testRigPreloadSameName(t *testing.T, rig *netnstest.Rig) {
	dir := t.TempDir()
	for _, d := range []string{"a", "b"} {
		os.Mkdir(filepath.Join(dir, d), 0o755)
		script := "#!/bin/sh\necho \"$GORUN_RANK " + d + " $GORUN_HOST_ID $0\"\n"
		if err := os.WriteFile(filepath.Join(dir, d, "prog"), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	r := gorun(t, "", append(rigArgs(rig), "-H", "h1:2,h2:2", "--map-by", "node", "--preload", "--spawn-radix", "1",
		"-np", "2", filepath.Join(dir, "a", "prog"), ":", "-np", "2", filepath.Join(dir, "b", "prog"))...)
	if r.code != 0 {
		t.Fatal(r)
	}
	got := lines(r.stdout)
	sort.Strings(got)
	want := regexp.MustCompile(`^(\d) ([ab]) (h\d) /\S+/gorun-preload-\w+/([12])/prog$`)
	var said []string
	for _, l := range got {
		m := want.FindStringSubmatch(l)
		if m == nil {
			t.Errorf("rank said %q, want its program's preloaded copy", l)
			continue
		}
		said = append(said, strings.Join(m[1:], " "))
	}
	if s := strings.Join(said, ", "); s != "0 a h1 1, 1 a h2 1, 2 b h1 2, 3 b h2 2" {
		t.Errorf("ranks ran %s, want ranks 0 and 1 program a from 1/prog and ranks 2 and 3 program b from 2/prog, on h1 and h2\n%s", s, r)
	}
}

// testRigBuilt runs a Go package that gorun builds, without --preload:
// the binary, in a temp dir of this machine, is copied to the other
// hosts, where the ranks run it (they ran the launcher's path, which
// only the rig's shared filesystem has), and the copies are removed.
// Radix 1: h1's agent copies it on to h2.
func testRigBuilt(t *testing.T, rig *netnstest.Rig) {
	r := gorun(t, "", append(rigArgs(rig), "-H", "h1:1,h2:1", "--spawn-radix", "1", "--verbose", "-np", "2", "./testdata/where")...)
	if r.code != 0 {
		t.Fatal(r)
	}
	if !strings.Contains(r.stderr, "copying where, which gorun built on this machine, to a temporary directory on each of the 2 other hosts") {
		t.Errorf("no verbose line says that the program is copied\n%s", r)
	}
	ran := regexp.MustCompile(`^\d (/\S+/gorun-preload-\w+)/1/where$`)
	dirs := map[string]bool{}
	for _, l := range lines(r.stdout) {
		m := ran.FindStringSubmatch(l)
		if m == nil {
			t.Errorf("rank ran %q, not a copy of the program", l)
			continue
		}
		dirs[m[1]] = true
	}
	if len(dirs) != 2 {
		t.Errorf("want a copy on each host, got %v", dirs)
	}
	for d := range dirs {
		if _, err := os.Stat(d); err == nil {
			t.Errorf("%s left behind", d)
		}
	}
}

// testRigUnreachable takes h4 off the network: gorun gives up on it
// within the connect timeout, naming it.
func testRigUnreachable(t *testing.T, rig *netnstest.Rig) {
	if err := rig.KillLink("h4"); err != nil {
		t.Fatal(err)
	}
	defer rig.RestoreLink("h4")
	r := gorun(t, "", append(rigArgs(rig), "-H", "h1:1,h4:1", "--connect-timeout", "2s", "-np", "2", "true")...)
	if r.code != 255 || !strings.Contains(r.stderr, "gorun: host h4: cannot start its agent: ssh exited 255") {
		t.Errorf("want status 255 and a line naming h4:\n%s", r)
	}
}

// checkNoLeftovers waits until no process runs on any rig host, nor an
// ssh to one on this machine.
func checkNoLeftovers(t *testing.T, rig *netnstest.Rig) {
	t.Helper()
	if pids := launcherSSH(rig); len(pids) > 0 {
		t.Errorf("ssh processes left on the launcher's side: %s", psList(pids))
		for _, p := range pids {
			syscall.Kill(p, syscall.SIGKILL)
		}
	}
	for _, h := range rig.Hosts {
		var pids []int
		for i := 0; i < 200; i++ {
			pids, _ = rig.Pids(h.Name)
			if len(pids) == 0 {
				break
			}
			time.Sleep(25 * time.Millisecond)
		}
		if len(pids) > 0 {
			t.Errorf("host %s: processes left: %s", h.Name, psList(pids))
			for _, p := range pids {
				syscall.Kill(p, syscall.SIGKILL)
			}
		}
	}
}

func psList(pids []int) string {
	var out []string
	for _, p := range pids {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p))
		out = append(out, fmt.Sprintf("%d %s", p, strings.ReplaceAll(string(b), "\x00", " ")))
	}
	sort.Strings(out)
	return strings.Join(out, "; ")
}
