package main

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gorun-hpc/gorun/examples/internal/proctest"

	"golang.org/x/sys/unix"

	"github.com/gorun-hpc/gorun/spmd/launch/netnstest"
)

// linkShape is what tc makes of every host's link: a rate and a one-way
// delay, none when rate is empty.
type linkShape struct {
	name  string
	rate  string  // tc's rate, e.g. 1gbit
	bps   float64 // the same in bits a second
	delay string  // netem's delay each way, e.g. 100us
}

// rigModel is about 3.3M parameters: 13 MB of fp32 gradients a step,
// 0.1 s of crossing at 1 Gbit/s, about as long as a step's compute on one
// core.
var rigModel = []string{"--dp", "2", "--layers", "4", "--embd", "256", "--heads", "4", "--block", "64",
	"--batch", "8", "--microbatches", "1", "--steps", "12", "--max-bytes", "1048576"}

// BenchmarkCompressRig trains examples/gpt with --dp 2 on two rig hosts,
// one rank each, so that every gradient crosses the hosts' links, for each
// codec on each link shape: the veth as is, 10 Gbit/s and 1 Gbit/s with
// 100 us of delay each way (netem; where the kernel lacks netem, tbf
// shapes the rate alone, without delay). It logs the median tokens/s of
// the steps after the first two and each codec's speed-up against none on
// the same link.
//
//	go test ./examples/gpt -run NONE -bench CompressRig -benchtime 1x
func BenchmarkCompressRig(b *testing.B) {
	rig := netnstest.New(b, 2)
	sh := newShaper(b, rig)
	gorun, gpt := buildBins(b)
	hostfile := filepath.Join(b.TempDir(), "hostfile")
	if err := os.WriteFile(hostfile, []byte("h1 slots=1\nh2 slots=1\n"), 0o600); err != nil {
		b.Fatal(err)
	}
	shapes := []linkShape{
		{name: "none"},
		{name: "10gbit", rate: "10gbit", bps: 10e9, delay: "100us"},
		{name: "1gbit", rate: "1gbit", bps: 1e9, delay: "100us"},
	}
	codecs := []string{"none", "fp16", "topk:0.01", "sign", "powersgd:4"}
	tps := make(map[string]map[string]float64) // by shape, then codec
	ratio := make(map[string]string)           // by codec
	var probes []string
	b.ResetTimer()
	for range b.N {
		for _, s := range shapes {
			sh.apply(s)
			probes = append(probes, s.name+" "+probe(b, rig))
			tps[s.name] = make(map[string]float64)
			for _, c := range codecs {
				out := runJob(b, gorun, gpt, rig.SSHConfig, hostfile, c)
				tps[s.name][c] = medianTPS(b, out)
				ratio[c] = compressionRatio(out)
			}
			sh.clear()
		}
	}
	b.StopTimer()
	// Few lines: without -v, go test shows only the first ten of a
	// benchmark's log.
	b.Logf("links %s\n%s\nmeasured h1->h2: %s", sh.describe(), table(shapes, codecs, tps, ratio), strings.Join(probes, "; "))
	for _, s := range shapes {
		for _, c := range codecs {
			b.ReportMetric(tps[s.name][c], "tok/s-"+s.name+"-"+strings.ReplaceAll(c, ":", "="))
		}
	}
	b.ReportMetric(0, "ns/op")
}

// buildBins builds gorun and examples/gpt into a temp dir.
func buildBins(b *testing.B) (gorun, gpt string) {
	b.Helper()
	bins := proctest.Build(b, "../../cmd/gorun", ".")
	return bins[0], bins[1]
}

// runJob runs the model with codec across the rig and returns rank 0's
// output.
func runJob(b *testing.B, gorun, gpt, sshConfig, hostfile, codec string) string {
	b.Helper()
	args := []string{"--ssh-args", "-F " + sshConfig, "--hostfile", hostfile, "-np", "2", "--timeout", "5m", gpt}
	args = append(append(args, rigModel...), "--compress", codec)
	cmd := exec.Command(gorun, args...)
	cmd.WaitDelay = 10 * time.Second
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		b.Fatalf("--compress %s: %v\n%s%s", codec, err, out, stderr.String())
	}
	return string(out)
}

// medianTPS is the median tokens/s of the step lines after the first two.
func medianTPS(b *testing.B, out string) float64 {
	b.Helper()
	var v []float64
	for l := range strings.Lines(out) {
		f := strings.Fields(l)
		if len(f) == 6 && f[0] == "step" && f[4] == "tokens/s" {
			x, err := strconv.ParseFloat(f[5], 64)
			if err != nil {
				b.Fatalf("line %q: %v", l, err)
			}
			v = append(v, x)
		}
	}
	if len(v) < 3 {
		b.Fatalf("%d step lines, want 3 or more:\n%s", len(v), out)
	}
	v = v[2:]
	slices.Sort(v)
	return v[len(v)/2]
}

// compressionRatio reads "(ratio X)" from the compression line.
func compressionRatio(out string) string {
	for l := range strings.Lines(out) {
		if _, r, ok := strings.Cut(l, "(ratio "); ok && strings.HasPrefix(l, "compression ") {
			return strings.TrimSuffix(strings.TrimSpace(r), ")")
		}
	}
	return "1.0"
}

// table formats tokens/s per codec and link, and the speed-up of each
// codec against none on the same link.
func table(shapes []linkShape, codecs []string, tps map[string]map[string]float64, ratio map[string]string) string {
	var t strings.Builder
	fmt.Fprintf(&t, "tokens/s (speed-up against none on the same link)\n%-12s %6s", "codec", "ratio")
	for _, s := range shapes {
		fmt.Fprintf(&t, " %20s", "link "+s.name)
	}
	for _, c := range codecs {
		fmt.Fprintf(&t, "\n%-12s %6s", c, ratio[c])
		for _, s := range shapes {
			v := tps[s.name][c]
			fmt.Fprintf(&t, " %12.0f (%4.2fx)", v, v/tps[s.name]["none"])
		}
	}
	return t.String()
}

// shaper sets and removes the qdisc on eth0 inside every host's
// namespace, so each host's sending is shaped and every byte from one host
// to the other passes one shaped queue.
type shaper struct {
	b     *testing.B
	rig   *netnstest.Rig
	netem bool // netem is there; otherwise tbf, rate alone
}

// newShaper skips the benchmark unless tc can shape a rig link, with
// netem or else tbf, and removes any qdisc left at cleanup.
func newShaper(b *testing.B, rig *netnstest.Rig) *shaper {
	b.Helper()
	if _, err := exec.LookPath("tc"); err != nil {
		b.Skip("tc not found: install iproute2")
	}
	exec.Command("modprobe", "sch_netem").Run() // may be built in, or missing
	sh := &shaper{b: b, rig: rig}
	b.Cleanup(sh.clear)
	probe := linkShape{rate: "1gbit", bps: 1e9, delay: "100us"}
	if sh.tc(sh.args(probe, true)...) == nil {
		sh.netem = true
	} else if err := sh.tc(sh.args(probe, false)...); err != nil {
		b.Skipf("tc can shape neither with netem nor with tbf: %v", err)
	}
	sh.clear()
	return sh
}

// args are tc's arguments that give eth0 shape s.
func (sh *shaper) args(s linkShape, netem bool) []string {
	if netem {
		return []string{"qdisc", "replace", "dev", "eth0", "root", "netem", "delay", s.delay, "rate", s.rate, "limit", "100000"}
	}
	// A burst of 200 us at the rate, at least 64 KiB so that a GSO
	// packet passes whole; a queue of 20 ms.
	burst := max(64<<10, int(s.bps/8*200e-6))
	return []string{"qdisc", "replace", "dev", "eth0", "root", "tbf", "rate", s.rate, "burst", strconv.Itoa(burst), "latency", "20ms"}
}

// describe says how apply shapes the links.
func (sh *shaper) describe() string {
	if sh.netem {
		return "shaped on each host's eth0 egress by netem: rate and delay each way"
	}
	return "shaped on each host's eth0 egress by tbf: rate alone, no delay (netem unavailable: no sch_netem in this kernel)"
}

// tc runs tc on every host's namespace.
func (sh *shaper) tc(args ...string) error {
	for _, h := range sh.rig.Hosts {
		if out, err := sh.rig.Command(h.Name, append([]string{"tc"}, args...)...).CombinedOutput(); err != nil {
			return fmt.Errorf("on %s: tc %s: %v: %s", h.Name, strings.Join(args, " "), err, bytes.TrimSpace(out))
		}
	}
	return nil
}

// apply gives every host's link shape s.
func (sh *shaper) apply(s linkShape) {
	sh.b.Helper()
	sh.clear()
	if s.rate == "" {
		return
	}
	if err := sh.tc(sh.args(s, sh.netem)...); err != nil {
		sh.b.Fatal(err)
	}
}

// clear removes the shape, leaving the default qdisc.
func (sh *shaper) clear() {
	for _, h := range sh.rig.Hosts {
		sh.rig.Command(h.Name, "tc", "qdisc", "del", "dev", "eth0", "root").Run() // fails when there is none
	}
}

// probe measures h1 to h2: the throughput of 64 MiB over TCP and the
// median round trip of one byte, to show the shape took.
func probe(b *testing.B, rig *netnstest.Rig) string {
	b.Helper()
	h1, h2 := rig.Hosts[0], rig.Hosts[1]
	var ln net.Listener
	if err := inNetns(h2.Netns, func() (err error) { ln, err = net.Listen("tcp", h2.Addr+":0"); return err }); err != nil {
		b.Fatalf("listening on h2: %v", err)
	}
	defer ln.Close()
	go echoSink(ln)
	var c net.Conn
	if err := inNetns(h1.Netns, func() (err error) { c, err = net.Dial("tcp", ln.Addr().String()); return err }); err != nil {
		b.Fatalf("dialing h2 from h1: %v", err)
	}
	defer c.Close()
	var rtts []time.Duration
	one := make([]byte, 1)
	for range 31 {
		t0 := time.Now()
		if _, err := c.Write([]byte{'p'}); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(c, one); err != nil {
			b.Fatal(err)
		}
		rtts = append(rtts, time.Since(t0))
	}
	slices.Sort(rtts)
	const n = 64 << 20
	buf := make([]byte, 1<<20)
	t0 := time.Now()
	for range n / len(buf) {
		buf[0] = 'd'
		if _, err := c.Write(buf); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := io.ReadFull(c, one); err != nil {
		b.Fatal(err)
	}
	d := time.Since(t0)
	return fmt.Sprintf("TCP %.2f Gbit/s, rtt %v", float64(n)*8/d.Seconds()/1e9, rtts[len(rtts)/2].Round(time.Microsecond))
}

// echoSink serves one connection: it answers each ping byte 'p' at once,
// and counts the 64 MiB of a transfer (begun by 'd') before answering.
func echoSink(ln net.Listener) {
	c, err := ln.Accept()
	if err != nil {
		return
	}
	defer c.Close()
	buf := make([]byte, 1<<20)
	var got int
	for {
		k, err := c.Read(buf)
		if err != nil {
			return
		}
		if got == 0 && k == 1 && buf[0] == 'p' {
			c.Write(buf[:1])
			continue
		}
		if got += k; got >= 64<<20 {
			c.Write(buf[:1])
			got = 0
		}
	}
}

// inNetns runs f on a thread that has joined network namespace ns; the
// sockets f makes stay in ns. The thread goes back to its namespace after.
// It must not exit instead: the rig's sshds die with the thread that
// started them (Pdeathsig), which may be this one.
func inNetns(ns string, f func() error) error {
	runtime.LockOSThread()
	home, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		runtime.UnlockOSThread()
		return err
	}
	defer unix.Close(home)
	fd, err := unix.Open(filepath.Join("/run/netns", ns), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		runtime.UnlockOSThread()
		return err
	}
	defer unix.Close(fd)
	if err := unix.Setns(fd, unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("setns %s: %w", ns, err)
	}
	ferr := f()
	if err := unix.Setns(home, unix.CLONE_NEWNET); err != nil {
		panic(fmt.Sprintf("returning from netns %s: %v", ns, err)) // the thread is in the wrong namespace
	}
	runtime.UnlockOSThread()
	return ferr
}
