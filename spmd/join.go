package spmd

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gorun-hpc/gorun/spmd/contract"

	"github.com/gorun-hpc/gorun/net/gossip"
	"github.com/gorun-hpc/gorun/net/rendezvous"
	"github.com/gorun-hpc/gorun/net/shm"
	"github.com/gorun-hpc/gorun/net/tcp"
	"github.com/gorun-hpc/gorun/spmd/transport"
)

// join is Init's work for a launched rank: listener, gossip, transport,
// barrier.
func join(ctx context.Context, env Env, secret []byte, o options) (*World, error) {
	bind := env.BindAddr
	if bind == "" {
		bind = "127.0.0.1"
	}
	hostID := env.HostID
	if hostID == "" {
		hostID = contract.LocalHostID()
	}
	hostname, _ := os.Hostname()
	var l *tcp.Listener
	err := env.Ports.Try(func(port int) (err error) {
		l, err = tcp.Listen(net.JoinHostPort(bind, strconv.Itoa(port)))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("opening the data-plane listener on %s (set %s to an address of this host): %w", bind, contract.EnvBindAddr, err)
	}
	o.logger.Printf("data plane listening on %s", l.Addr())

	ictx, cancel := context.WithTimeout(ctx, env.InitTimeout)
	defer cancel()

	cpus := contract.HostCPUs() // the CPUs this host's ranks share
	// The gossip reports lost ranks from the moment Join returns; the
	// transport that acts on them exists only after, so the callback looks it up.
	var tr atomic.Pointer[watcher]
	cfg := gossip.Config{
		JobID:    env.JobID,
		Secret:   secret,
		BindAddr: bind,
		Seeds:    env.Seeds,
		Crowd:    (env.LocalSize + cpus - 1) / cpus,
		Logger:   verboseOnly(env, o),
		OnLost: func(rank int, reason string) {
			o.logger.Printf("gossip: rank %d %s", rank, reason)
			gossipLost(tr.Load(), rank)
		},
	}
	self := gossip.Member{Rank: env.Rank, HostID: hostID, Hostname: hostname, Addr: l.Addr(), Pid: os.Getpid()}
	var peers []Peer
	var closeGossip func() error
	if env.Rendezvous != "" {
		peers, closeGossip, err = register(ictx, ctx, env, secret, self, cfg)
	} else {
		peers, closeGossip, err = gossipJoin(ictx, env, self, cfg)
	}
	if err != nil {
		l.Close()
		if errors.Is(err, gossip.ErrTimeout) || errors.Is(err, rendezvous.ErrTimeout) {
			return nil, fmt.Errorf("%w (raise %s, or check that every rank started)", err, contract.EnvInitTimeout)
		}
		return nil, err
	}
	addrs := make([]string, len(peers))
	for i, p := range peers {
		addrs[i] = p.Addr
	}
	far := tcp.New(l, env.Rank, addrs, secret, tcp.WithLogger(verboseOnly(env, o)))
	t, err := dataPlane(ictx, env, secret, far, peers, hostID, o)
	if err != nil {
		closeGossip()
		far.Close()
		return nil, err
	}
	tr.Store(&watcher{t})

	rec := o.trace
	if rec == nil && env.ProfileDir != "" {
		if rec, err = newRecorder(env, hostname); err != nil {
			closeGossip()
			t.Close()
			return nil, err
		}
	}
	w, err := New(t, env.Rank, peers, WithLogger(o.logger), WithTrace(rec))
	if err != nil {
		closeGossip()
		t.Close()
		rec.Close()
		return nil, err
	}
	w.env = env
	w.core.engine.crowded = env.LocalSize > cpus
	w.closers = append(w.closers, closeGossip)
	if env.StatusFD > 0 {
		report, closeReport := statusReporter(env.StatusFD)
		w.core.engine.report = report
		w.closers = append(w.closers, closeReport)
	}

	if err := w.Barrier(ictx); err != nil {
		w.Close()
		return nil, fmt.Errorf("barrier after rendezvous: %w", err)
	}
	if rec != nil {
		if err := w.startProfile(ictx, rec); err != nil {
			w.Close()
			return nil, err
		}
	}
	o.logger.Printf("ready: %d ranks", env.Size)
	return w, nil
}

// register meets the other ranks at the launcher's rendezvous: one
// connection, one table. The gossip, which then only watches for lost
// ranks, runs only in a job across hosts, and does not hold up Init: on
// one host the launcher sees every rank's process, the kernel closes a
// dead rank's sockets and shared memory watches its peers' pids, so
// gossip would only cost the ranks' CPU (256 ranks of 2 cores never
// converged) and their leave at the end.
//
// A rank waits rendezvousGrace past its Init deadline (ctx's), so that
// when a rank is missing the launcher, told each rank's deadline, stops the
// job with one message before every rank prints its own. A cancel of
// outer, the context Init was given (the launcher's SIGTERM, in a program
// that stops on it), ends the wait, also during the grace: watching ctx,
// a cancel that came just after its deadline was missed, and the rank
// waited out the grace after the job had been stopped.
func register(ctx, outer context.Context, env Env, secret []byte, self gossip.Member, cfg gossip.Config) ([]Peer, func() error, error) {
	if dl, ok := ctx.Deadline(); ok {
		// The Init deadline does not end the wait, a cancel still does.
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(context.WithoutCancel(ctx), dl.Add(rendezvousGrace))
		defer cancel()
		stop := context.AfterFunc(outer, func() {
			if outer.Err() == context.Canceled {
				cancel()
			}
		})
		defer stop()
	}
	recs, err := rendezvous.Register(ctx, env.Rendezvous, env.JobID, secret, rendezvous.Record{
		Rank: self.Rank, HostID: self.HostID, Hostname: self.Hostname, Addr: self.Addr, Pid: self.Pid,
	}, env.Size, rendezvousGrace)
	if err != nil {
		return nil, nil, err
	}
	peers := make([]Peer, len(recs))
	hosts := false
	for i, r := range recs {
		peers[i] = Peer{Rank: r.Rank, HostID: r.HostID, Hostname: r.Hostname, Addr: r.Addr, Pid: r.Pid}
		hosts = hosts || r.HostID != self.HostID
	}
	if !hosts || len(env.Seeds) == 0 {
		return peers, func() error { return nil }, nil
	}
	gctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	var node *gossip.Node // set before done is closed
	go func() {
		defer close(done)
		env.Ports.Try(func(port int) (err error) {
			cfg.BindPort = port
			node, _, err = gossip.Join(gctx, cfg, self, env.Size)
			if err != nil && gctx.Err() == nil && cfg.Logger != nil {
				cfg.Logger.Printf("gossip: %v; lost ranks are noticed by their connections only", err)
			}
			return err
		})
	}()
	return peers, func() error {
		cancel()
		<-done
		if node != nil {
			return node.Close()
		}
		return nil
	}, nil
}

// rendezvousGrace is how long past its Init deadline a rank waits at the
// rendezvous for the launcher's verdict.
const rendezvousGrace = 2 * time.Second

// gossipJoin meets the other ranks through the gossip alone, for ranks
// started without gorun's rendezvous: Init returns once this rank's
// gossip knows every rank.
func gossipJoin(ctx context.Context, env Env, self gossip.Member, cfg gossip.Config) ([]Peer, func() error, error) {
	var node *gossip.Node
	var members []gossip.Member
	err := env.Ports.Try(func(port int) (err error) {
		cfg.BindPort = port
		node, members, err = gossip.Join(ctx, cfg, self, env.Size)
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	peers := make([]Peer, len(members))
	for i, m := range members {
		peers[i] = Peer{Rank: m.Rank, HostID: m.HostID, Hostname: m.Hostname, Addr: m.Addr, Pid: m.Pid}
	}
	return peers, node.Close, nil
}

// gossipLost acts on the gossip's word that rank is gone. The transport is
// asked to watch the rank rather than the rank being dropped at once: one
// that left gracefully may still have messages in flight on its connection
// (they drain, then the closed connection reports the loss), and one that
// the gossip only suspects, as a slow rank on an oversubscribed host can be,
// must not be cut off while its connection still answers. A dead process's
// connection closes, or refuses the dial, at once.
func gossipLost(w *watcher, rank int) {
	if w != nil {
		w.t.Watch(rank)
	}
}

// watcher holds the transport that gossipLost asks to watch a rank.
type watcher struct{ t transport.Transport }

// shareCores gives a rank that reaches the other ranks of its host over
// TCP its share of the host's cores as Go processors (GOMAXPROCS), unless
// GOMAXPROCS says otherwise, as torchrun sets OMP_NUM_THREADS=1. Every
// message it receives wakes Go's netpoller; with processors to spare, a
// thread of the rank wakes for it, and runs a reader goroutine, while the
// waiting goroutine polls the socket itself: threads that take the cores of
// the ranks that must answer (perf stat: 21 context switches per 8-byte
// all-reduce at np 4 on 2 cores, 7.5 with GOMAXPROCS=1, Open MPI 12.7).
// All-reduce over TCP, medians of 3 alternating collbench runs, GOMAXPROCS
// 2 -> 1: np 4 on 2 cores 8 B 87 -> 52 us, 2 KiB 93 -> 48 us, 1 MiB 2.5
// -> 2.0 ms, 16 MiB 31 -> 28 ms; np 2 8 B 10 -> 9 us, 1 MiB 0.70 -> 0.45
// ms, 16 MiB 12.3 -> 11.9 ms. Ranks that share memory keep every core:
// they wait on the memory, not on the netpoller, and there GOMAXPROCS=1
// made most sizes slower (np 4 1 MiB all-reduce 0.60 -> 0.92 ms, np 8 8 B
// 14 -> 20 us). gorun sets GOMAXPROCS itself for every rank that shares a
// host, whatever its transport, unless the user chose (spmd/launch/procs.go);
// this rule is for ranks started by other launchers.
func shareCores(local int, o options) {
	if _, set := os.LookupEnv("GOMAXPROCS"); set {
		return
	}
	n := max(1, runtime.NumCPU()/local)
	if runtime.GOMAXPROCS(0) > n {
		runtime.GOMAXPROCS(n)
		o.logger.Printf("%d ranks of this host over TCP: GOMAXPROCS=%d, this rank's share of %d cores (set GOMAXPROCS to choose)", local, n, runtime.NumCPU())
	}
}

// dataPlane returns the rank's transport: TCP alone, or, when other ranks
// share this host and GORUN_TRANSPORT does not say tcp, shared memory to
// them and TCP to the rest.
func dataPlane(ctx context.Context, env Env, secret []byte, far transport.Transport, peers []Peer, hostID string, o options) (transport.Transport, error) {
	local := make([]bool, len(peers))
	var near []int
	for i, p := range peers {
		if p.HostID == hostID {
			local[i] = true
			near = append(near, i)
		}
	}
	if env.Transport == "tcp" || len(near) < 2 {
		if len(near) > 1 {
			shareCores(len(near), o)
		}
		return far, nil
	}
	opts := []shm.Option{shm.WithLogger(verboseOnly(env, o))}
	if env.SingleCopy >= 0 {
		opts = append(opts, shm.WithSingleCopy(env.SingleCopy))
	}
	if env.NoHugePages {
		opts = append(opts, shm.WithHugePages(false))
	}
	if d, ok := ctx.Deadline(); ok {
		opts = append(opts, shm.WithAttachTimeout(time.Until(d)))
	}
	t, err := shm.New(env.JobID, env.Rank, near, env.Size, secret, opts...)
	if err != nil {
		return nil, fmt.Errorf("shared memory with the %d ranks of this host: %w (set %s=tcp to use TCP instead)", len(near), err, contract.EnvTransport)
	}
	o.logger.Printf("shared memory with ranks %v, TCP to the rest", near)
	return &router{near: t, far: far, local: local}, nil
}

// statusReporter returns a function that writes "lost R" to descriptor fd
// (GORUN_STATUS_FD) for a lost peer of world rank R, and one that closes
// it. gorun reads the lines: a rank that fails after losing a peer that
// failed too is not the first failure. The descriptor is not passed on to
// the rank's own children.
func statusReporter(fd int) (report func(peer int), close func() error) {
	syscall.CloseOnExec(fd)
	f := os.NewFile(uintptr(fd), "gorun-status")
	return func(peer int) {
		f.Write([]byte("lost " + strconv.Itoa(peer) + "\n")) // gorun gone: nobody to tell
	}, f.Close
}
