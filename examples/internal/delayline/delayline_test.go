//go:build linux

package delayline

import (
	"crypto/sha256"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gorun-hpc/gorun/spmd/launch/netnstest"
	"github.com/gorun-hpc/gorun/spmd/launch/testhost"
)

// rigHosts skips t unless TUN devices can be made, and returns two rig
// hosts to join.
func rigHosts(t testing.TB) (a, b Host, rig *netnstest.Rig) {
	t.Helper()
	if reason := testhost.NeedRoot("create TUN devices"); reason != "" {
		t.Skip("delayline: " + reason)
	}
	if f, err := os.OpenFile("/dev/net/tun", os.O_RDWR, 0); err != nil {
		t.Skip("delayline: no TUN devices: " + err.Error())
	} else {
		f.Close()
	}
	rig = netnstest.New(t, 2)
	h1, h2 := rig.Hosts[0], rig.Hosts[1]
	return Host{Netns: h1.Netns, Addr: h1.Addr}, Host{Netns: h2.Netns, Addr: h2.Addr}, rig
}

// newLine starts a line and closes it at cleanup.
func newLine(t testing.TB, a, b Host, s Shape) *Line {
	t.Helper()
	l, err := New(a, b, s)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := l.Close(); err != nil {
			t.Error(err)
		}
	})
	return l
}

// dial returns a TCP connection from a to a listener on b, and b's end.
func dial(t testing.TB, a, b Host) (ca, cb net.Conn) {
	t.Helper()
	var ln net.Listener
	if err := inNetns(b.Netns, func() (err error) { ln, err = net.Listen("tcp", b.Addr+":0"); return err }); err != nil {
		t.Fatalf("listening on %s: %v", b.Addr, err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	if err := inNetns(a.Netns, func() (err error) { ca, err = net.Dial("tcp", ln.Addr().String()); return err }); err != nil {
		t.Fatalf("dialing %s from %s: %v", ln.Addr(), a.Addr, err)
	}
	t.Cleanup(func() { ca.Close() })
	if cb = <-accepted; cb == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { cb.Close() })
	return ca, cb
}

// pings echoes n single bytes from a to b and back and returns the round
// trips, sorted.
func pings(t testing.TB, a, b Host, n int) []time.Duration {
	t.Helper()
	ca, cb := dial(t, a, b)
	go io.Copy(cb, cb)
	rtts := make([]time.Duration, n)
	one := make([]byte, 1)
	for i := range rtts {
		t0 := time.Now()
		if _, err := ca.Write(one); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(ca, one); err != nil {
			t.Fatal(err)
		}
		rtts[i] = time.Since(t0)
	}
	slices.Sort(rtts)
	return rtts
}

// transfer sends n random bytes from a to b over TCP, fails t unless b
// receives them intact, and returns how long it took.
func transfer(t testing.TB, a, b Host, n int) time.Duration {
	t.Helper()
	ca, cb := dial(t, a, b)
	got := make(chan [sha256.Size]byte, 1)
	go func() {
		h := sha256.New()
		io.Copy(h, cb)
		got <- [sha256.Size]byte(h.Sum(nil))
	}()
	data := make([]byte, n)
	rnd := rand.NewChaCha8([32]byte{1})
	rnd.Read(data)
	t0 := time.Now()
	if _, err := ca.Write(data); err != nil {
		t.Fatal(err)
	}
	ca.(*net.TCPConn).CloseWrite()
	sum := <-got
	d := time.Since(t0)
	if sum != sha256.Sum256(data) {
		t.Fatalf("%d bytes from %s to %s arrived changed", n, a.Addr, b.Addr)
	}
	return d
}

// routeDev returns the device host h routes to addr through.
func routeDev(t testing.TB, h Host, addr string) string {
	t.Helper()
	out, err := exec.Command("ip", "-n", h.Netns, "-o", "route", "get", addr).CombinedOutput()
	if err != nil {
		t.Fatalf("ip route get %s in %s: %v: %s", addr, h.Netns, err, out)
	}
	f := strings.Fields(string(out))
	if i := slices.Index(f, "dev"); i >= 0 && i+1 < len(f) {
		return f[i+1]
	}
	t.Fatalf("ip route get %s in %s: no dev in %q", addr, h.Netns, out)
	return ""
}

// TestDelay: with 2 ms each way, a byte's TCP round trip takes 4 ms or
// more, and the line counts packets both ways; strict reverse-path
// filtering does not stop them.
func TestDelay(t *testing.T) {
	a, b, rig := rigHosts(t)
	for _, h := range rig.Hosts {
		rig.Run(t, h.Name, "sh", "-c", "echo 1 >/proc/sys/net/ipv4/conf/all/rp_filter && echo 1 >/proc/sys/net/ipv4/conf/default/rp_filter")
	}
	l := newLine(t, a, b, Shape{Delay: 2 * time.Millisecond})
	if dev := routeDev(t, a, b.Addr); dev != Device {
		t.Fatalf("%s routes to %s through %s, want %s", a.Netns, b.Addr, dev, Device)
	}
	rtts := pings(t, a, b, 20)
	if rtts[0] < 4*time.Millisecond {
		t.Errorf("shortest round trip %v through a line of 2ms each way, want 4ms or more", rtts[0])
	}
	s := l.Stats()
	if s.AB.Packets < 20 || s.BA.Packets < 20 {
		t.Errorf("stats %+v: want 20 or more packets each way", s)
	}
	if s.AB.Err != nil || s.BA.Err != nil {
		t.Errorf("stats %+v: a direction failed", s)
	}
	t.Logf("round trips: min %v, median %v, max %v; late %v on average, %v at most", rtts[0], rtts[len(rtts)/2], rtts[len(rtts)-1], s.AB.MeanLate, s.AB.MaxLate)
}

// TestRate: at 100 Mbit/s, 8 MiB take 0.6 s or more and arrive intact.
func TestRate(t *testing.T) {
	a, b, _ := rigHosts(t)
	l := newLine(t, a, b, Shape{Rate: 100e6, Delay: 100 * time.Microsecond})
	const n = 8 << 20
	d := transfer(t, a, b, n)
	if d < 600*time.Millisecond {
		t.Errorf("8 MiB in %v at 100 Mbit/s, want 0.6s or more", d)
	}
	s := l.Stats()
	if s.AB.Bytes < n {
		t.Errorf("stats %+v: want %d bytes or more from a to b", s, n)
	}
	t.Logf("8 MiB in %v: %.1f Mbit/s; %+v", d, float64(n)*8/d.Seconds()/1e6, s.AB)
}

// TestDrop: a queue shorter than TCP's bursts drops packets, and Stats
// counts them; TCP sends them again and the data arrives intact.
func TestDrop(t *testing.T) {
	a, b, _ := rigHosts(t)
	l := newLine(t, a, b, Shape{Rate: 50e6, Limit: 100_000})
	transfer(t, a, b, 2<<20)
	s := l.Stats()
	if s.AB.Dropped == 0 {
		t.Errorf("stats %+v: no packet dropped with a queue of 100 kB", s.AB)
	}
	t.Logf("%+v", s.AB)
}

// TestClose: Close removes the devices and their routes, traffic goes
// over eth0 again, GOMAXPROCS is as before, and a second Close does
// nothing.
func TestClose(t *testing.T) {
	a, b, _ := rigHosts(t)
	procs := runtime.GOMAXPROCS(0)
	l, err := New(a, b, Shape{Delay: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	pings(t, a, b, 3)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if p := runtime.GOMAXPROCS(0); p != procs {
		t.Errorf("GOMAXPROCS %d after Close, want %d as before New", p, procs)
	}
	for _, h := range []Host{a, b} {
		if out, err := exec.Command("ip", "-n", h.Netns, "link", "show", Device).CombinedOutput(); err == nil {
			t.Errorf("%s still in %s after Close: %s", Device, h.Netns, out)
		}
		if out := routes(t, h); strings.Contains(out, Device) {
			t.Errorf("routes through %s left in %s after Close:\n%s", Device, h.Netns, out)
		}
	}
	if dev := routeDev(t, a, b.Addr); dev != "eth0" {
		t.Errorf("%s routes to %s through %s after Close, want eth0", a.Netns, b.Addr, dev)
	}
	before := l.Stats()
	transfer(t, a, b, 1<<20)
	if after := l.Stats(); after.AB.Packets != before.AB.Packets {
		t.Errorf("the closed line forwarded: %+v, then %+v", before.AB, after.AB)
	}
	if err := l.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// TestNewFails: New undoes what it did when it fails half-way, here on
// routing to an address b's namespace has already.
func TestNewFails(t *testing.T) {
	a, b, rig := rigHosts(t)
	rig.Run(t, "h2", "ip", "route", "add", a.Addr+"/32", "dev", "eth0")
	if l, err := New(a, b, Shape{}); err == nil {
		l.Close()
		t.Fatal("New succeeded with a route in the way")
	} else {
		t.Log(err)
	}
	for _, h := range []Host{a, b} {
		if out, err := exec.Command("ip", "-n", h.Netns, "link", "show", Device).CombinedOutput(); err == nil {
			t.Errorf("%s left in %s by a failed New: %s", Device, h.Netns, out)
		}
		if out := routes(t, h); strings.Contains(out, Device) {
			t.Errorf("routes through %s left in %s by a failed New:\n%s", Device, h.Netns, out)
		}
	}
	rig.Run(t, "h2", "ip", "route", "del", a.Addr+"/32")
	newLine(t, a, b, Shape{})
	pings(t, a, b, 3)
}

// routes lists every route of h's namespace, all tables.
func routes(t testing.TB, h Host) string {
	t.Helper()
	out, err := exec.Command("ip", "-n", h.Netns, "route", "show", "table", "all").CombinedOutput()
	if err != nil {
		t.Fatalf("ip route show in %s: %v: %s", h.Netns, err, out)
	}
	return string(out)
}

// BenchmarkLine measures what lines of several shapes give between two
// rig hosts, against eth0 without a line: the round trip of one byte over
// TCP (median and 90th percentile of 200), the throughput of 16 MiB
// transfers, the CPU time the line's threads took per second of transfer
// (in % of one core) and how late they delivered packets on average.
//
//	go test ./examples/internal/delayline -run NONE -bench Line -benchtime 8x
func BenchmarkLine(b *testing.B) {
	a, h, _ := rigHosts(b)
	cases := []struct {
		name  string
		shape *Shape
	}{
		{"eth0", nil},
		{"delay=0", &Shape{}},
		{"delay=50us", &Shape{Delay: 50 * time.Microsecond}},
		{"delay=100us", &Shape{Delay: 100 * time.Microsecond}},
		{"delay=200us", &Shape{Delay: 200 * time.Microsecond}},
		{"1gbit-100us", &Shape{Rate: 1e9, Delay: 100 * time.Microsecond}},
		{"10gbit-50us", &Shape{Rate: 10e9, Delay: 50 * time.Microsecond}},
		{"10gbit-200us", &Shape{Rate: 10e9, Delay: 200 * time.Microsecond}},
	}
	const n = 16 << 20
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			var l *Line
			if c.shape != nil {
				l = newLine(b, a, h, *c.shape)
			}
			rtts := pings(b, a, h, 200)
			ca, cb := dial(b, a, h)
			go sink(cb, n)
			buf := make([]byte, 1<<20)
			var cpu0 time.Duration
			if l != nil {
				s := l.Stats()
				cpu0 = s.AB.CPU + s.BA.CPU
			}
			b.SetBytes(n)
			b.ResetTimer()
			for range b.N {
				for range n / len(buf) {
					if _, err := ca.Write(buf); err != nil {
						b.Fatal(err)
					}
				}
				if _, err := io.ReadFull(ca, buf[:1]); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			d := b.Elapsed()
			b.ReportMetric(float64(rtts[len(rtts)/2].Nanoseconds())/1e3, "rtt-us")
			b.ReportMetric(float64(rtts[len(rtts)*9/10].Nanoseconds())/1e3, "rtt90-us")
			b.ReportMetric(float64(n)*float64(b.N)*8/d.Seconds()/1e9, "Gbit/s")
			if l != nil {
				s := l.Stats()
				b.ReportMetric(100*(s.AB.CPU+s.BA.CPU-cpu0).Seconds()/d.Seconds(), "line-cpu-%")
				b.ReportMetric(float64(s.AB.MeanLate.Nanoseconds())/1e3, "late-us")
				b.ReportMetric(float64(s.AB.Wake.Nanoseconds())/1e3, "wake-us")
				b.ReportMetric(float64(s.AB.Dropped+s.AB.Overflowed), "drops")
			}
		})
	}
}

// sink reads transfers of n bytes from c and answers each with one byte.
func sink(c net.Conn, n int) {
	buf := make([]byte, 1<<20)
	for got := 0; ; {
		k, err := c.Read(buf)
		if err != nil {
			return
		}
		if got += k; got >= n {
			c.Write(buf[:1])
			got -= n
		}
	}
}
