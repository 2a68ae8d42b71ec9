//go:build linux

package delayline

import (
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Device is the name of the line's TUN device in each namespace.
const Device = "dl0"

// MTU is the devices' MTU: large, so that 10 Gbit/s is some 20,000
// packets a second rather than 800,000.
const MTU = 65000

// Limits of the default queue: 20 ms at the rate, at most 4 MiB, at least
// two packets.
const (
	defaultQueueTime = 20 * time.Millisecond
	maxDefaultLimit  = 4 << 20
	minLimit         = 2 * maxPacket
)

// ErrBadShape is returned by New, wrapped, for a Shape that Validate
// rejects.
var ErrBadShape = errors.New("delayline: bad shape")

// Shape is what a line makes of each direction of the link between its
// hosts.
type Shape struct {
	Rate  float64       // bits a second; 0 for no limit
	Delay time.Duration // one way, after the packet has left at the rate
	Limit int           // bytes that may wait to leave; 0 for 20 ms at the rate, at most 4 MiB; none wait without a rate
}

// Validate returns an error wrapping ErrBadShape when a field is negative.
func (s Shape) Validate() error {
	switch {
	case s.Rate < 0:
		return fmt.Errorf("%w: rate %g bit/s; want 0 (unlimited) or more", ErrBadShape, s.Rate)
	case s.Delay < 0:
		return fmt.Errorf("%w: delay %v; want 0 or more", ErrBadShape, s.Delay)
	case s.Limit < 0:
		return fmt.Errorf("%w: limit %d bytes; want 0 (default) or more", ErrBadShape, s.Limit)
	}
	return nil
}

// limit is the queue limit in bytes, the default filled in.
func (s Shape) limit() int {
	if s.Limit > 0 {
		return s.Limit
	}
	if s.Rate == 0 {
		return maxDefaultLimit
	}
	return min(max(int(s.Rate/8*defaultQueueTime.Seconds()), minLimit), maxDefaultLimit)
}

// String describes s, e.g. "1 Gbit/s, 100µs each way".
func (s Shape) String() string {
	rate := "unlimited"
	if s.Rate > 0 {
		rate = fmt.Sprintf("%g Gbit/s", s.Rate/1e9)
	}
	return fmt.Sprintf("%s, %v each way", rate, s.Delay)
}

// Host is one end of a line.
type Host struct {
	Netns string // its network namespace, /run/netns/<Netns>
	Addr  string // its IPv4 address, which the other host reaches through the line
}

// Line joins two network namespaces with a TUN device in each and forwards
// the packets between them with a rate and a delay. Stats may be called
// from any goroutine, also after Close; Close is idempotent.
type Line struct {
	hosts [2]Host
	shape Shape
	tuns  [2]int // TUN file descriptors, -1 when not open
	stop  int    // eventfd that stops the pipes, -1 when not open
	pipes [2]*pipe
	wg    sync.WaitGroup

	reserved bool // GOMAXPROCS has a P for each pipe

	closeOnce sync.Once
	closeErr  error
}

// Stats counts what a line has forwarded, each way.
type Stats struct {
	AB, BA Flow // from a to b, from b to a
}

// Flow counts one direction of a line.
type Flow struct {
	Packets, Bytes uint64        // delivered
	Dropped        uint64        // packets that found the queue full (Limit)
	Overflowed     uint64        // packets that found no room in the line's buffer: it fell behind
	Refused        uint64        // packets the receiving device refused
	MeanLate       time.Duration // how much later than due packets were delivered, on average
	MaxLate        time.Duration // and at most
	Wake           time.Duration // the latency of the thread's timed wake-ups, which it wakes that much early to make up for (see wait)
	CPU            time.Duration // CPU time of the direction's thread
	Err            error         // what stopped the direction early, if anything
}

// New creates the TUN device Device in a's and b's namespaces, routes each
// host's traffic to the other's address through it, and starts forwarding
// with shape s. Traffic between the two addresses then takes the line
// whatever the programs, while everything else keeps its route. It
// raises GOMAXPROCS by two until Close (see the package comment). On error
// New undoes what it did.
func New(a, b Host, s Shape) (*Line, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	for _, h := range []Host{a, b} {
		if ip, err := netip.ParseAddr(h.Addr); err != nil || !ip.Is4() {
			return nil, fmt.Errorf("delayline: host %s: address %q is not IPv4", h.Netns, h.Addr)
		}
	}
	l := &Line{hosts: [2]Host{a, b}, shape: s, tuns: [2]int{-1, -1}, stop: -1}
	if err := l.setup(); err != nil {
		return nil, errors.Join(err, l.Close())
	}
	return l, nil
}

// setup opens the devices, starts the pipes and routes through them.
func (l *Line) setup() error {
	c, err := newClock()
	if err != nil {
		return fmt.Errorf("delayline: reading the clock: %w", err)
	}
	if l.stop, err = unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK); err != nil {
		return fmt.Errorf("delayline: eventfd: %w", err)
	}
	for i, h := range l.hosts {
		if l.tuns[i], err = openTun(h.Netns, Device); err != nil {
			return err
		}
	}
	for _, h := range l.hosts {
		if err := ip("-n", h.Netns, "link", "set", Device, "mtu", fmt.Sprint(MTU), "up"); err != nil {
			return err
		}
	}
	if err := l.start(c); err != nil {
		return err
	}
	// Routes last, so that traffic takes the line once it forwards. The
	// routes are symmetric, so strict reverse-path filtering passes the
	// packets that come out of the devices: rp_filter is left as it is.
	for i, h := range l.hosts {
		peer := l.hosts[1-i]
		if err := ip("-n", h.Netns, "route", "add", peer.Addr+"/32", "dev", Device, "src", h.Addr); err != nil {
			return err
		}
	}
	return nil
}

// start starts the pipes and waits until they forward.
func (l *Line) start(c *clock) error {
	for i := range l.pipes {
		l.pipes[i] = l.newPipe(l.tuns[i], l.tuns[1-i], c)
	}
	reserveProcs(len(l.pipes))
	l.reserved = true
	for _, p := range l.pipes {
		l.wg.Go(p.run)
	}
	for _, p := range l.pipes {
		<-p.ready
		if err := p.err.Load(); err != nil {
			return fmt.Errorf("delayline: starting: %w", *err)
		}
	}
	return nil
}

// newPipe returns a pipe from src to dst with the line's shape.
func (l *Line) newPipe(src, dst int, c *clock) *pipe {
	s := l.shape
	pc := pacer{delay: int64(s.Delay), limit: float64(s.limit())}
	if s.Rate > 0 {
		pc.nsPerByte = 8e9 / s.Rate
	}
	// Room for the queue, for what is on the wire (the delay at the rate,
	// at 10 Gbit/s when unlimited), for 2 ms of the thread falling behind,
	// and for the packet being read and the end of the ring left unused.
	rate := s.Rate
	if rate == 0 {
		rate = 10e9
	}
	size := s.limit() + int(rate/8*(s.Delay+2*time.Millisecond).Seconds()) + 2*maxPacket
	return &pipe{src: src, dst: dst, stop: l.stop, ring: newRing(size), clock: c, pace: pc, ready: make(chan struct{})}
}

// Hosts returns the line's two hosts, a and b.
func (l *Line) Hosts() (a, b Host) { return l.hosts[0], l.hosts[1] }

// Shape returns the line's shape, as given to New.
func (l *Line) Shape() Shape { return l.shape }

// Stats returns what the line has forwarded so far.
func (l *Line) Stats() Stats {
	var s Stats
	if p := l.pipes[0]; p != nil {
		s.AB = p.flow()
	}
	if p := l.pipes[1]; p != nil {
		s.BA = p.flow()
	}
	return s
}

// Close stops forwarding and removes the devices, and the routes with
// them, leaving the namespaces as they were before New. It returns an error
// when a device is left. It is idempotent, and waits for the line's
// threads.
func (l *Line) Close() error {
	l.closeOnce.Do(func() { l.closeErr = l.teardown() })
	return l.closeErr
}

// teardown is Close's work, done once.
func (l *Line) teardown() error {
	for _, p := range l.pipes {
		if p != nil {
			p.stopped.Store(true)
		}
	}
	if l.stop >= 0 {
		signal(l.stop)
	}
	l.wg.Wait()
	if l.reserved {
		releaseProcs(len(l.pipes))
	}
	var errs []error
	if l.stop >= 0 {
		errs = append(errs, unix.Close(l.stop))
	}
	// A TUN device that is not persistent goes, with its routes, when the
	// last descriptor attached to it closes.
	for i, fd := range l.tuns {
		if fd < 0 {
			continue
		}
		errs = append(errs, unix.Close(fd))
		l.tuns[i] = -1
		errs = append(errs, awaitGone(l.hosts[i].Netns, Device))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("delayline: closing: %w", err)
	}
	return nil
}
