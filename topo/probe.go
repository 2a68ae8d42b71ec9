package topo

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"time"
	"unsafe"

	"github.com/gorun-hpc/gorun/prims/kernel"
	"github.com/gorun-hpc/gorun/spmd"
	"github.com/gorun-hpc/gorun/spmd/contract"
	"golang.org/x/sys/unix"
)

// The collective-context tags topo sends on. prims and other libraries
// that send on Comm.Collective() must not use them (spmd itself takes
// spmd.MaxTag and spmd.MaxTag-1).
const (
	ProbeTag = spmd.MaxTag - 16 // the ping-pongs of Probe
	AgreeTag = spmd.MaxTag - 17 // rank 0's constants, broadcast
)

// The probe's message sizes and round trips: many of the smallest message
// for the latency, fewer of the larger ones for the bandwidth. With 3
// round trips of each large size and the fastest of them, beta varied 6x
// between runs of gorun --topo -np 4 on 2 cores (0.16-0.96 ns/B).
var probeSizes = []struct{ bytes, warm, rounds int }{
	{8, 10, 150},
	{PulledProbe, 2, 10},
	{1 << 20, 2, 10},
}

// chunks is how many pieces a probe's timings are cut into: a size's time
// is the median of the pieces' fastest, so that neither one lucky round
// nor a stretch in which another rank took the core decides it.
const chunks = 5

// steady returns the median of the minimums of xs cut into chunks pieces.
func steady(xs []float64) float64 {
	n := max(1, len(xs)/chunks)
	var mins []float64
	for i := 0; i < len(xs); i += n {
		mins = append(mins, slices.Min(xs[i:min(i+n, len(xs))]))
	}
	return quantile(mins, 0.5)
}

// modelKey caches a communicator's fitted Model with Comm.SetValue;
// communicators made by Split inherit it.
type modelKey struct{}

// ModelFor returns the model cached on c, fitting one with Probe and
// caching it the first time. That first time must be a collective call:
// every rank of c makes it, in the same order as their other collective
// calls on c (prims.Choose makes it on a communicator's first call that
// needs a choice). Every rank gets the same model: the fitted constants
// are rank 0's, broadcast to all.
func ModelFor(ctx context.Context, c *spmd.Comm) (Model, error) {
	if m, ok := Cached(c); ok {
		return m, nil
	}
	m, err := Probe(ctx, c)
	if err != nil {
		return Model{}, err
	}
	c.SetValue(modelKey{}, m)
	return m, nil
}

// Cached returns the model cached on c (or on the communicator c was
// split from), if any. It never probes.
func Cached(c *spmd.Comm) (Model, bool) {
	m, ok := c.Value(modelKey{}).(Model)
	return m, ok
}

// Probe measures the links between the ranks of c and fits a Model; every
// rank of c must call it. It times ping-pongs of a few sizes between one
// pair of ranks per link class (sharing a host, on two hosts), the
// dissemination barrier of c for the latency of busy oversubscribed
// ranks, and a float32 sum on rank 0, fits alpha and beta per class by
// least squares, and broadcasts rank 0's constants to every rank. A class
// that c has no pair for keeps DefaultModel's constants. On 8 ranks of one
// 2-core host it takes 25-50 ms.
func Probe(ctx context.Context, c *spmd.Comm) (Model, error) {
	m := DefaultModel()
	m.Cores = contract.HostCPUs()
	cc := c.Collective()
	if cc.Size() == 1 {
		return m, nil
	}
	lay := LayoutOf(c)
	local, remote := probePairs(lay)
	if local != nil {
		k, ok, err := pingPong(ctx, cc, local)
		if err != nil {
			return Model{}, fmt.Errorf("probing a same-host link on comm %d: %w", c.ID(), err)
		}
		if ok {
			m.Local, m.LocalProbed = k, true
		}
	}
	if remote != nil {
		k, ok, err := pingPong(ctx, cc, remote)
		if err != nil {
			return Model{}, fmt.Errorf("probing an other-host link on comm %d: %w", c.ID(), err)
		}
		if ok {
			m.Remote, m.RemoteProbed = k, true
		}
	}
	busy, err := barrierLatency(ctx, cc)
	if err != nil {
		return Model{}, fmt.Errorf("probing the barrier on comm %d: %w", c.ID(), err)
	}
	if cc.Rank() == 0 {
		m.Gamma = reductionTime()
		over := lay.MaxPerHost() - m.Cores
		switch {
		case over > 0 && m.LocalProbed:
			m.Wake = max(0, busy-m.Alpha(Shape{PerHost: m.Cores}, len(lay.Hosts) > 1)) / float64(over)
		case len(lay.Hosts) == 1 && m.LocalProbed:
			m.Round = busy
		}
	}
	m, err = agree(ctx, cc, m)
	if err != nil {
		return Model{}, fmt.Errorf("agreeing on the model of comm %d: %w", c.ID(), err)
	}
	return m, nil
}

// probePairs picks the pair that measures each link class: rank 0 and the
// next rank of its host (else the first two ranks of the first host that
// has two), and rank 0 and the first rank of the next host.
func probePairs(lay Layout) (local, remote []int) {
	for _, h := range lay.Hosts {
		if len(h) > 1 && (local == nil || h[0] == 0) {
			local = h[:2]
		}
	}
	if len(lay.Hosts) > 1 {
		remote = []int{lay.Hosts[0][0], lay.Hosts[1][0]}
	}
	return local, remote
}

// pingPong times round trips between pair[0] and pair[1], fits their link
// on pair[0] and sends the fit to rank 0. It returns the fit on rank 0 (ok
// set) and nothing elsewhere.
//
// Its buffers are mapped outside the Go heap (scratch), and the receive
// of each bandwidth message, and of its echo, is posted before the message
// can come (timeLink, echo), so that the probe leaves nothing for the
// garbage collector. It left 1.5-4 MB, a 2-rank job's first collective on
// the 2-core VM: the messages that came before their receive were taken
// aside, into a buffer of their size from a pool that another processor's
// pool did not hand back. With Init's 0.35 MB that set off the job's
// first collection a few milliseconds later; its concurrent mark took 4
// ms, on the core of a rank bound to one with GOMAXPROCS 2, and
// collbench's first size at np 2 came out 1.2-1.9x the next one's time
// (8-byte all-gathers 0.18-0.20 us against 0.11).
func pingPong(ctx context.Context, cc *spmd.Comm, pair []int) (Link, bool, error) {
	me := cc.Rank()
	a, b := pair[0], pair[1]
	var k Link
	if me == a || me == b {
		peer := a + b - me
		top := probeSizes[len(probeSizes)-1].bytes
		mem, err := mapScratch(2 * top)
		if err != nil {
			return Link{}, false, err
		}
		if me == b {
			err = echo(ctx, cc, a, [2][]byte{mem[:top], mem[top:]})
		} else {
			k, err = timeLink(ctx, cc, b, mem[:top], mem[top:])
		}
		if err != nil {
			// A receive may still be posted into mem: it stays mapped.
			return Link{}, false, err
		}
		unmapScratch(mem)
		k.Pull = float64(cc.SingleCopy(peer))
	}
	if a == 0 {
		return k, me == 0, nil
	}
	msg := make([]byte, 24)
	switch me {
	case a:
		binary.LittleEndian.PutUint64(msg, math.Float64bits(k.Alpha))
		binary.LittleEndian.PutUint64(msg[8:], math.Float64bits(k.Beta))
		binary.LittleEndian.PutUint64(msg[16:], math.Float64bits(k.Pull))
		return Link{}, false, cc.Send(ctx, 0, ProbeTag, msg)
	case 0:
		if _, err := cc.Recv(ctx, a, ProbeTag, msg); err != nil {
			return Link{}, false, err
		}
		k.Alpha = math.Float64frombits(binary.LittleEndian.Uint64(msg))
		k.Beta = math.Float64frombits(binary.LittleEndian.Uint64(msg[8:]))
		k.Pull = math.Float64frombits(binary.LittleEndian.Uint64(msg[16:]))
		return k, true, nil
	}
	return Link{}, false, nil
}

// earlyPost is the smallest probe message whose receive is posted before
// the message is sent: the bandwidth ones. Posting first puts a few tenths
// of a microsecond on the echo's way back (alpha came out 0.40 us against
// 0.21 on the VM), so the latency size is not posted first.
const earlyPost = PulledProbe

// timeLink is pingPong's timing side: it sends each message of
// probeSizes to peer and waits for its echo, and fits the halves of the
// round trips. A bandwidth message's echo comes into recv, whose receive
// is posted before the message leaves send.
func timeLink(ctx context.Context, cc *spmd.Comm, peer int, send, recv []byte) (Link, error) {
	var xs, ys []float64
	for _, s := range probeSizes {
		times := make([]float64, 0, s.rounds)
		for i := range s.warm + s.rounds {
			start := time.Now()
			if err := roundTrip(ctx, cc, peer, send[:s.bytes], recv[:s.bytes]); err != nil {
				return Link{}, err
			}
			if i >= s.warm {
				times = append(times, time.Since(start).Seconds()/2)
			}
		}
		xs = append(xs, float64(s.bytes))
		ys = append(ys, steady(times))
	}
	return fitLink(xs, ys), nil
}

// roundTrip sends send to peer and receives its echo: into recv, posted
// first, from earlyPost bytes; into send below.
func roundTrip(ctx context.Context, cc *spmd.Comm, peer int, send, recv []byte) error {
	if len(send) < earlyPost {
		if err := cc.Send(ctx, peer, ProbeTag, send); err != nil {
			return err
		}
		_, err := cc.Recv(ctx, peer, ProbeTag, send)
		return err
	}
	r := cc.Irecv(peer, ProbeTag, recv)
	if err := cc.Send(ctx, peer, ProbeTag, send); err != nil {
		return err
	}
	if _, err := r.Wait(ctx); err != nil {
		return err
	}
	r.Free()
	return nil
}

// echo is pingPong's other side: it sends every message of timeLink back
// to peer. It takes the messages into the two buffers in turn, and posts
// the receive of a bandwidth message before the echo of the one before it
// leaves, since peer sends it as soon as that echo is in.
func echo(ctx context.Context, cc *spmd.Comm, peer int, bufs [2][]byte) error {
	var sizes []int
	for _, s := range probeSizes {
		for range s.warm + s.rounds {
			sizes = append(sizes, s.bytes)
		}
	}
	var next *spmd.Request // the posted receive of message i
	for i, n := range sizes {
		buf := bufs[i%2][:n]
		if next == nil {
			if _, err := cc.Recv(ctx, peer, ProbeTag, buf); err != nil {
				return err
			}
		} else {
			if _, err := next.Wait(ctx); err != nil {
				return err
			}
			next.Free()
			next = nil
		}
		if i+1 < len(sizes) && sizes[i+1] >= earlyPost {
			next = cc.Irecv(peer, ProbeTag, bufs[(i+1)%2][:sizes[i+1]])
		}
		if err := cc.Send(ctx, peer, ProbeTag, buf); err != nil {
			return err
		}
	}
	return nil
}

// fitLink fits t = alpha + n*beta to the points: beta is the least-squares
// slope, alpha what the smallest message leaves of its time (the intercept
// of the fit would carry the noise of the large messages). Both stay
// positive.
func fitLink(ns, ts []float64) Link {
	var sx, sy, sxx, sxy float64
	for i := range ns {
		sx += ns[i]
		sy += ts[i]
		sxx += ns[i] * ns[i]
		sxy += ns[i] * ts[i]
	}
	k := float64(len(ns))
	beta := (k*sxy - sx*sy) / (k*sxx - sx*sx)
	if !(beta > 0) {
		beta = 1e-12
	}
	alpha := ts[0] - ns[0]*beta
	if !(alpha > 0) {
		alpha = ts[0]
	}
	return Link{Alpha: max(alpha, 1e-7), Beta: beta}
}

// barrierLatency returns the time of one round of c's dissemination
// barrier, every rank busy in it: the lower quartile of a few barriers,
// which shrugs off a rank that a start-up chore kept from the first ones.
func barrierLatency(ctx context.Context, cc *spmd.Comm) (float64, error) {
	const warm, rounds = 4, 64
	times := make([]float64, 0, rounds)
	for i := range warm + rounds {
		start := time.Now()
		if err := cc.Barrier(ctx); err != nil {
			return 0, err
		}
		if i >= warm {
			times = append(times, time.Since(start).Seconds())
		}
	}
	return quantile(times, 0.5) / float64(bits.Len(uint(cc.Size()-1))), nil // ceil(lg p) rounds
}

// reductionTime returns the seconds per byte of summing one float32 buffer
// into another, by the kernel that prims' sums run (package kernel). It
// used to time a plain Go loop, 4-8x slower than the AVX2 kernel (1 MiB in
// BenchmarkKernel: 3.8 against 32 GB/s; this probe's 256 KiB: 0.136
// against 0.018 ns/B), so gamma priced every reduction several times too
// high. Replayed over a choice run at np 2, 4 and 8 (bench/replay), the
// choices within 15% of the fastest stayed the same (179 of 213 sizes).
func reductionTime() float64 {
	const n = 64 << 10
	mem, err := mapScratch(2 * 4 * n)
	if err != nil {
		mem = make([]byte, 2*4*n) // the heap will do
	} else {
		defer unmapScratch(mem)
	}
	f := unsafe.Slice((*float32)(unsafe.Pointer(&mem[0])), 2*n)
	a, b := f[:n], f[n:]
	for i := range b {
		b[i] = float32(i)
	}
	best := math.Inf(1)
	for range 10 {
		start := time.Now()
		kernel.AddF32(a, b)
		best = min(best, time.Since(start).Seconds())
	}
	return best / (4 * n)
}

// quantile returns the q-quantile of xs (0.5: the median); xs is not modified.
func quantile(xs []float64, q float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[int(q*float64(len(s)-1))]
}

// agree broadcasts rank 0's model to every rank of cc by a binomial tree.
func agree(ctx context.Context, cc *spmd.Comm, m Model) (Model, error) {
	msg := encodeModel(m)
	r, p := cc.Rank(), cc.Size()
	mask := 1
	if r > 0 {
		mask = 1 << (bits.Len(uint(r)) - 1) // r's highest bit: r got it from r-mask
		if _, err := cc.Recv(ctx, r-mask, AgreeTag, msg); err != nil {
			return Model{}, err
		}
		mask <<= 1
	}
	for ; r+mask < p; mask <<= 1 {
		if r < mask {
			if err := cc.Send(ctx, r+mask, AgreeTag, msg); err != nil {
				return Model{}, err
			}
		}
	}
	return decodeModel(msg)
}

const modelLen = 11 * 8

func encodeModel(m Model) []byte {
	b := make([]byte, modelLen)
	flags := 0.0
	if m.LocalProbed {
		flags += 1
	}
	if m.RemoteProbed {
		flags += 2
	}
	for i, v := range []float64{m.Local.Alpha, m.Local.Beta, m.Remote.Alpha, m.Remote.Beta, m.Gamma, m.Wake, float64(m.Cores), flags, m.Local.Pull, m.Remote.Pull, m.Round} {
		binary.LittleEndian.PutUint64(b[8*i:], math.Float64bits(v))
	}
	return b
}

func decodeModel(b []byte) (Model, error) {
	v := make([]float64, modelLen/8)
	for i := range v {
		v[i] = math.Float64frombits(binary.LittleEndian.Uint64(b[8*i:]))
	}
	m := Model{Local: Link{Alpha: v[0], Beta: v[1], Pull: v[8]}, Remote: Link{Alpha: v[2], Beta: v[3], Pull: v[9]}, Gamma: v[4], Wake: v[5], Cores: int(v[6]),
		LocalProbed: int(v[7])&1 != 0, RemoteProbed: int(v[7])&2 != 0, Round: v[10]}
	if !m.Valid() {
		return Model{}, fmt.Errorf("rank 0 sent an invalid model %+v", m)
	}
	return m, nil
}

// mapScratch maps n bytes of private anonymous memory, outside the Go
// heap, for a buffer that lives only while the probe runs: the garbage
// collector neither counts it towards its next collection nor scans it.
// unmapScratch gives it back.
func mapScratch(n int) ([]byte, error) {
	mem, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, fmt.Errorf("mapping %d bytes for the probe's buffers: %w", n, err)
	}
	return mem, nil
}

func unmapScratch(mem []byte) { unix.Munmap(mem) }
