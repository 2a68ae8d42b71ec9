package spmdtest

import (
	"context"
	"crypto/rand"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/gorun-hpc/gorun/net/mem"
	"github.com/gorun-hpc/gorun/net/shm"
	"github.com/gorun-hpc/gorun/net/tcp"
	"github.com/gorun-hpc/gorun/spmd"
	"github.com/gorun-hpc/gorun/spmd/transport"
)

// Timeout bounds one Run; a test that deadlocks fails instead of hanging.
const Timeout = 60 * time.Second

// Kind names a transport a test job runs over.
type Kind string

// The transports a test job can run over.
const (
	Mem Kind = "mem"
	TCP Kind = "tcp"
	SHM Kind = "shm"
	// Mixed puts the ranks on two hosts, even ranks on one and odd on the
	// other: shared memory between ranks of a host, TCP across.
	Mixed Kind = "mixed"
)

// Kinds lists every transport, for tests that run over each.
var Kinds = []Kind{Mem, TCP, SHM, Mixed}

// Job is the worlds of one test job and the means to kill a rank of it.
type Job struct {
	Worlds []*spmd.World
	// Kill makes a rank vanish as a crashed process would: its peers see it
	// lost, through the transport's own means.
	Kill func(rank int)
}

// Close closes every world.
func (j *Job) Close() {
	for _, w := range j.Worlds {
		w.Close()
	}
}

// Worlds builds the worlds of n ranks over one mem network, each given
// the options opts returns for its rank (such as spmd.WithTrace), if
// any. The caller closes them.
func Worlds(tb testing.TB, n int, opts ...func(rank int) []spmd.Option) ([]*spmd.World, *mem.Network) {
	tb.Helper()
	nw := mem.NewNetwork(n)
	ws := make([]*spmd.World, n)
	for i := range ws {
		var o []spmd.Option
		for _, f := range opts {
			o = append(o, f(i)...)
		}
		w, err := spmd.New(nw.Transport(i), i, Peers(n, "mem"), o...)
		if err != nil {
			tb.Fatalf("rank %d: %v", i, err)
		}
		ws[i] = w
	}
	return ws, nw
}

// Peers describes n ranks that all run on host.
func Peers(n int, host string) []spmd.Peer {
	peers := make([]spmd.Peer, n)
	for i := range peers {
		peers[i] = spmd.Peer{Rank: i, HostID: host, Hostname: host, Addr: fmt.Sprintf("%s:%d", host, i)}
	}
	return peers
}

// NewJob builds an n-rank job over the transport kind.
func NewJob(tb testing.TB, kind Kind, n int) *Job {
	tb.Helper()
	switch kind {
	case Mem:
		ws, nw := Worlds(tb, n)
		return &Job{Worlds: ws, Kill: nw.Kill}
	case TCP:
		return tcpJob(tb, n)
	case SHM:
		return shmJob(tb, n)
	case Mixed:
		return mixedJob(tb, n)
	}
	tb.Fatalf("spmdtest: unknown transport %q", kind)
	return nil
}

// tcpJob builds n worlds joined by real loopback TCP connections with a
// fresh secret. Killing a rank closes its transport, which its peers see as
// a closed connection, as they would a dead process's.
func tcpJob(tb testing.TB, n int) *Job {
	trs, addrs := tcpTransports(tb, n, newSecret())
	peers := Peers(n, "loopback")
	ts := make([]transport.Transport, n)
	for i := range trs {
		peers[i].Addr, ts[i] = addrs[i], trs[i]
	}
	return start(tb, ts, peers)
}

// tcpTransports opens n loopback listeners and the transports over them.
func tcpTransports(tb testing.TB, n int, secret []byte) ([]*tcp.Transport, []string) {
	ls := make([]*tcp.Listener, n)
	addrs := make([]string, n)
	for i := range ls {
		l, err := tcp.Listen("127.0.0.1:0")
		if err != nil {
			tb.Fatalf("listen: %v", err)
		}
		ls[i], addrs[i] = l, l.Addr()
	}
	trs := make([]*tcp.Transport, n)
	for i := range ls {
		trs[i] = tcp.New(ls[i], i, addrs, secret)
	}
	return trs, addrs
}

// start builds the worlds over ts; Kill closes a rank's transport.
func start(tb testing.TB, ts []transport.Transport, peers []spmd.Peer) *Job {
	j := &Job{Worlds: make([]*spmd.World, len(ts))}
	for i, t := range ts {
		w, err := spmd.New(t, i, peers)
		if err != nil {
			tb.Fatalf("rank %d: %v", i, err)
		}
		j.Worlds[i] = w
	}
	j.Kill = func(r int) { ts[r].Close() }
	return j
}

func newSecret() []byte {
	secret := make([]byte, 32)
	rand.Read(secret)
	return secret
}

// shmJob builds n worlds on one host joined by shared memory. Every
// rank's segment exists before any rank starts, as Start waits for its
// peers'. Killing a rank closes its transport; the job's files are removed
// when the test ends, as the launcher removes them after a job.
func shmJob(tb testing.TB, n int) *Job {
	if n == 1 { // a rank alone needs no transport; shm wants peers
		ws, nw := Worlds(tb, 1)
		return &Job{Worlds: ws, Kill: nw.Kill}
	}
	all := make([]int, n)
	for i := range all {
		all[i] = i
	}
	trs := shmTransports(tb, n, newSecret(), func(int) []int { return all })
	ts := make([]transport.Transport, n)
	for i := range trs {
		ts[i] = trs[i]
	}
	return start(tb, ts, Peers(n, "shm"))
}

// shmTransports creates every rank's segment before any rank starts, as
// Start waits for its peers'. The job's files are removed when the test
// ends, as the launcher removes them after a job.
func shmTransports(tb testing.TB, n int, secret []byte, hostOf func(rank int) []int) []*shm.Transport {
	id := make([]byte, 8)
	rand.Read(id)
	jobID := fmt.Sprintf("test%x", id)
	tb.Cleanup(func() { shm.Cleanup(jobID) })
	trs := make([]*shm.Transport, n)
	for i := range trs {
		if len(hostOf(i)) < 2 {
			continue
		}
		t, err := shm.New(jobID, i, hostOf(i), n, secret)
		if err != nil {
			tb.Fatalf("rank %d: %v", i, err)
		}
		trs[i] = t
	}
	return trs
}

// mixedJob puts even ranks on host "h0" and odd ranks on "h1": shared
// memory within a host, TCP across. Killing a rank closes both its
// transports.
func mixedJob(tb testing.TB, n int) *Job {
	secret := newSecret()
	hosts := [2][]int{}
	for r := 0; r < n; r++ {
		hosts[r%2] = append(hosts[r%2], r)
	}
	near := shmTransports(tb, n, secret, func(r int) []int { return hosts[r%2] })
	far, addrs := tcpTransports(tb, n, secret)
	peers := make([]spmd.Peer, n)
	ts := make([]transport.Transport, n)
	for r := range ts {
		h := fmt.Sprintf("h%d", r%2)
		peers[r] = spmd.Peer{Rank: r, HostID: h, Hostname: h, Addr: addrs[r]}
		if near[r] == nil {
			ts[r] = far[r] // alone on its host
			continue
		}
		local := make([]bool, n)
		for _, q := range hosts[r%2] {
			local[q] = true
		}
		ts[r] = spmd.Route(near[r], far[r], local)
	}
	return start(tb, ts, peers)
}

// Run runs f as every rank of an n-rank job over net/mem and fails tb with
// the errors of the ranks that returned one, each naming its rank.
func Run(tb testing.TB, n int, f func(ctx context.Context, w *spmd.World) error) {
	tb.Helper()
	RunOn(tb, Mem, n, f)
}

// RunOn is Run over the transport kind.
func RunOn(tb testing.TB, kind Kind, n int, f func(ctx context.Context, w *spmd.World) error) {
	tb.Helper()
	run(tb, NewJob(tb, kind, n), string(kind), f)
}

// RunHosts is Run with rank i on the host named hosts[i], over net/mem: for
// code that groups ranks by host (hierarchical algorithms, topo's layout).
func RunHosts(tb testing.TB, hosts []string, f func(ctx context.Context, w *spmd.World) error) {
	tb.Helper()
	n := len(hosts)
	nw := mem.NewNetwork(n)
	peers := make([]spmd.Peer, n)
	for i, h := range hosts {
		peers[i] = spmd.Peer{Rank: i, HostID: h, Hostname: h, Addr: fmt.Sprintf("mem:%d", i)}
	}
	ts := make([]transport.Transport, n)
	for i := range ts {
		ts[i] = nw.Transport(i)
	}
	j := start(tb, ts, peers)
	j.Kill = nw.Kill
	run(tb, j, fmt.Sprintf("mem on hosts %v", hosts), f)
}

// run runs f as every rank of j, closes j, and fails tb with the errors of
// the ranks that returned one. A rank that fails is closed at once, so that
// ranks waiting on it fail instead of hanging.
func run(tb testing.TB, j *Job, label string, f func(ctx context.Context, w *spmd.World) error) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	defer cancel()
	n := len(j.Worlds)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i, w := range j.Worlds {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if errs[i] = f(ctx, w); errs[i] != nil {
				w.Close()
			}
		}()
	}
	wg.Wait()
	j.Close()
	for i, err := range errs {
		if err != nil {
			tb.Errorf("rank %d of %d over %s: %v", i, n, label, err)
		}
	}
}
