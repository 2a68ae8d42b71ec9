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

	"github.com/gorun-hpc/gorun/examples/internal/delayline"
	"github.com/gorun-hpc/gorun/spmd/spmdtest/proctest"

	"golang.org/x/sys/unix"

	"github.com/gorun-hpc/gorun/spmd/launch/netnstest"
)

// linkShape is what every host's link becomes: a rate and a one-way
// delay, none when rate is empty.
type linkShape struct {
	name  string
	rate  string        // tc's rate, e.g. 1gbit
	bps   float64       // the same in bits a second
	delay time.Duration // each way
}

// rigModel is about 3.3M parameters: 13 MB of fp32 gradients a step,
// 0.1 s of crossing at 1 Gbit/s, about as long as a step's compute on one
// core.
var rigModel = []string{"--dp", "2", "--layers", "4", "--embd", "256", "--heads", "4", "--block", "64",
	"--batch", "8", "--microbatches", "1", "--steps", "12", "--max-bytes", "1048576"}

// BenchmarkCompressRig trains examples/gpt with --dp 2 on two rig hosts,
// one rank each, so that every gradient crosses the hosts' links, for each
// codec on each link shape: the veth as is, 10 Gbit/s with 50 us and with
// 200 us of delay each way, and 1 Gbit/s with 100 us. netem shapes the
// links where the kernel has it; elsewhere a userspace delay line
// (examples/internal/delayline) does, with TUN devices between the two
// hosts. It logs the median tokens/s of the steps after the first two,
// each codec's speed-up against none on the same link, and what a probe
// measured of each shape.
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
		{name: "10g-50us", rate: "10gbit", bps: 10e9, delay: 50 * time.Microsecond},
		{name: "10g-200us", rate: "10gbit", bps: 10e9, delay: 200 * time.Microsecond},
		{name: "1g-100us", rate: "1gbit", bps: 1e9, delay: 100 * time.Microsecond},
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
			probes[len(probes)-1] += sh.stats()
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

// shaper gives the hosts' links a shape and takes it away: with netem on
// eth0 inside every host's namespace, so each host's sending is shaped and
// every byte from one host to the other passes one shaped queue; or, where
// the kernel lacks netem, with a delay line between h1 and h2.
type shaper struct {
	b     *testing.B
	rig   *netnstest.Rig
	netem bool            // netem is there; otherwise the delay line
	line  *delayline.Line // the delay line of the shape applied, if any
}

// newShaper skips the benchmark unless netem or the delay line can shape
// a rig link, and takes any shape away at cleanup.
func newShaper(b *testing.B, rig *netnstest.Rig) *shaper {
	b.Helper()
	sh := &shaper{b: b, rig: rig}
	b.Cleanup(sh.clear)
	probe := linkShape{rate: "1gbit", bps: 1e9, delay: 100 * time.Microsecond}
	if _, err := exec.LookPath("tc"); err == nil {
		exec.Command("modprobe", "sch_netem").Run() // may be built in, or missing
		if sh.tc(sh.netemArgs(probe)...) == nil {
			sh.netem = true
			sh.clear()
			return sh
		}
	}
	if err := sh.newLine(probe); err != nil {
		b.Skipf("links cannot be shaped: no netem, and the delay line: %v", err)
	}
	sh.clear()
	return sh
}

// netemArgs are tc's arguments that give eth0 shape s.
func (sh *shaper) netemArgs(s linkShape) []string {
	delay := fmt.Sprintf("%dus", s.delay.Microseconds())
	return []string{"qdisc", "replace", "dev", "eth0", "root", "netem", "delay", delay, "rate", s.rate, "limit", "100000"}
}

// newLine joins h1 and h2 by a delay line of shape s.
func (sh *shaper) newLine(s linkShape) error {
	h1, h2 := sh.rig.Hosts[0], sh.rig.Hosts[1]
	l, err := delayline.New(delayline.Host{Netns: h1.Netns, Addr: h1.Addr}, delayline.Host{Netns: h2.Netns, Addr: h2.Addr},
		delayline.Shape{Rate: s.bps, Delay: s.delay})
	if err != nil {
		return err
	}
	sh.line = l
	return nil
}

// describe says how apply shapes the links.
func (sh *shaper) describe() string {
	if sh.netem {
		return "shaped on each host's eth0 egress by netem: rate and delay each way"
	}
	return "shaped by a userspace delay line between h1 and h2 (no sch_netem in this kernel): TUN devices, rate and delay each way, " +
		"on top of the line's own latency (compare the probes' rtt with none); ssh from the launcher is not shaped"
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
	var err error
	if sh.netem {
		err = sh.tc(sh.netemArgs(s)...)
	} else {
		err = sh.newLine(s)
	}
	if err != nil {
		sh.b.Fatal(err)
	}
}

// stats says what the delay line forwarded under the shape applied, or
// nothing without one.
func (sh *shaper) stats() string {
	if sh.line == nil {
		return ""
	}
	s := sh.line.Stats()
	return fmt.Sprintf(" (line: %d+%d packets, %d+%d dropped, delivered %v late on average, CPU %v)",
		s.AB.Packets, s.BA.Packets, s.AB.Dropped+s.AB.Overflowed, s.BA.Dropped+s.BA.Overflowed,
		s.AB.MeanLate.Round(time.Microsecond), (s.AB.CPU + s.BA.CPU).Round(time.Millisecond))
}

// clear takes the shape away: the default qdisc, no delay line.
func (sh *shaper) clear() {
	if sh.line != nil {
		if err := sh.line.Close(); err != nil {
			sh.b.Error(err)
		}
		sh.line = nil
	}
	if !sh.netem {
		return
	}
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
