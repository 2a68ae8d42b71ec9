//go:build linux

package delayline

import (
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// wakeStep is how far one timed wait moves the estimate of the thread's
// wake-up latency.
const wakeStep = 500 * time.Nanosecond

// maxWake bounds that estimate, and with it the brief sleeps a packet
// takes at most before it is due (see wait): on a machine so busy that the
// thread wakes later than this, waking earlier would only cost CPU.
const maxWake = 100 * time.Microsecond

// minTracked is the shortest timed wait whose latency counts towards the
// estimate.
const minTracked = 20 * time.Microsecond

// pipe forwards one direction of a line: it reads packets from device src,
// gives each its due time and writes it to device dst then. One OS thread,
// locked for its life, does both, and waits in the kernel (ppoll) for the
// next packet, the next due time or the line's stop, whichever comes
// first: a single thread has no hand-off between a reader and a writer to
// wait for. The counters are written by that thread and read by Stats.
type pipe struct {
	src, dst int // TUN file descriptors
	stop     int // eventfd, readable once the line closes
	ring     *ring
	clock    *clock
	pace     pacer
	wake     int64 // the thread's wake-up latency from a timed wait, ns: a running median

	ready   chan struct{} // closed once the thread forwards, or has failed to start
	stopped atomic.Bool

	packets, bytes               atomic.Uint64
	dropped, overflowed, refused atomic.Uint64
	lateSum, lateMax             atomic.Int64
	wakeSeen                     atomic.Int64
	tid, cpu                     atomic.Int64 // cpu is set at the thread's end
	err                          atomic.Pointer[error]
}

// pacer gives each packet its due time, as netem does: a packet leaves
// when the link has sent the packets before it and itself, at the rate,
// and arrives the delay after; one that would make the backlog waiting to
// leave exceed the limit is dropped.
type pacer struct {
	nsPerByte float64 // 8e9/rate; 0 when unlimited
	delay     int64   // ns
	limit     float64 // bytes
	last      int64   // when the last packet accepted leaves, ns
}

// due returns when a packet of n bytes read at now is to be delivered, or
// false when the queue has no room for it.
func (p *pacer) due(now int64, n int) (int64, bool) {
	if p.nsPerByte == 0 {
		return now + p.delay, true
	}
	start := max(now, p.last)
	if backlog := float64(start-now) / p.nsPerByte; backlog+float64(n) > p.limit {
		return 0, false
	}
	p.last = start + int64(float64(n)*p.nsPerByte)
	return p.last + p.delay, true
}

// run is the pipe's thread: it delivers and receives packets, one of each
// in turn so that neither starves the other, and waits when there is
// neither, until the line stops or a device fails. Its timer slack is 1 ns,
// so that the kernel wakes it when asked rather than up to 50 us later.
func (p *pipe) run() {
	runtime.LockOSThread() // never unlocked: the thread ends with the goroutine, slack and all
	p.tid.Store(int64(unix.Gettid()))
	defer func() { p.cpu.Store(max(threadCPU(-1), 1)) }()
	if err := unix.Prctl(unix.PR_SET_TIMERSLACK, 1, 0, 0, 0); err != nil {
		p.fail(fmt.Errorf("timer slack: %w", err))
		close(p.ready)
		return
	}
	fds := []unix.PollFd{{Fd: int32(p.src), Events: unix.POLLIN}, {Fd: int32(p.stop), Events: unix.POLLIN}}
	p.calibrate()
	close(p.ready)
	scratch := make([]byte, maxPacket)
	for !p.stopped.Load() {
		wrote := p.deliver(p.clock.now())
		read, err := p.receive(scratch)
		if err != nil {
			p.fail(err)
			return
		}
		if !wrote && !read {
			if err := p.wait(fds); err != nil {
				p.fail(err)
				return
			}
		}
	}
}

// deliver writes the oldest packet if it is due by now, and says whether
// it did. No packet leaves before its due time.
func (p *pipe) deliver(now int64) bool {
	pkt, at, ok := p.ring.head()
	if !ok || at > now {
		return false
	}
	late := now - at
	// Counted before the write, so that whoever has received the packet
	// finds it in Stats: counted after, a transfer's last packet could
	// arrive before its bytes were added (TestRate saw 3,032 bytes short
	// of 8 MiB on a loaded host), and taken back if the write fails.
	p.packets.Add(1)
	p.bytes.Add(uint64(len(pkt)))
	if _, err := unix.Write(p.dst, pkt); err != nil {
		p.packets.Add(^uint64(0))
		p.bytes.Add(-uint64(len(pkt)))
		p.refused.Add(1)
	}
	p.lateSum.Add(late)
	if late > p.lateMax.Load() {
		p.lateMax.Store(late)
	}
	p.ring.pop()
	return true
}

// receive reads one packet, if one is waiting, and queues or drops it. It
// says whether there was one, and fails when src does.
func (p *pipe) receive(scratch []byte) (bool, error) {
	buf := p.ring.reserve()
	into := buf
	if buf == nil {
		into = scratch
	}
	for {
		n, err := unix.Read(p.src, into)
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.EAGAIN:
			return false, nil
		case err != nil:
			return false, fmt.Errorf("reading: %w", err)
		case buf == nil:
			p.overflowed.Add(1)
		default:
			if at, ok := p.pace.due(p.clock.now(), n); ok {
				p.ring.push(n, at)
			} else {
				p.dropped.Add(1)
			}
		}
		return true, nil
	}
}

// wait sleeps until a packet comes, the line stops, or the oldest packet
// is due. When the packet is due later than the wake-up latency and then
// some, it asks to wake that latency before the due time, and moves its
// estimate of the latency towards how late it woke; when it is due sooner,
// it sleeps as briefly as it can (a ppoll of 1 ns, which takes some 20 us
// on a virtual machine) and looks again, so that the packet is late by
// little rather than by the whole latency.
func (p *pipe) wait(fds []unix.PollFd) error {
	now := p.clock.now()
	_, at, ok := p.ring.head()
	if !ok {
		if _, err := unix.Ppoll(fds, nil, nil); err != nil && err != unix.EINTR {
			return fmt.Errorf("ppoll: %w", err)
		}
		return nil
	}
	want := now + 1
	if at-now > p.wake+int64(minTracked) {
		want = at - p.wake
	}
	ts := unix.NsecToTimespec(want - now)
	n, err := unix.Ppoll(fds, &ts, nil)
	if err != nil && err != unix.EINTR {
		return fmt.Errorf("ppoll: %w", err)
	}
	// Only sleeps long enough for the CPU to go idle take the full
	// latency; the shortest take a third of it and would skew the median.
	if n == 0 && err == nil && want-now >= int64(minTracked) {
		if p.clock.now()-want > p.wake {
			p.wake = min(p.wake+int64(wakeStep), int64(maxWake))
		} else {
			p.wake = max(p.wake-int64(wakeStep), 0)
		}
		p.wakeSeen.Store(p.wake)
	}
	return nil
}

// calibrate sets the first estimate of the thread's wake-up latency: the
// median of a few sleeps of 100 us. Later, only the timed waits of
// minTracked or longer move the estimate, and a shorter delay makes none.
func (p *pipe) calibrate() {
	var late [15]int64
	for i := range late {
		want := p.clock.now() + int64(100*time.Microsecond)
		ts := unix.NsecToTimespec(want)
		unix.ClockNanosleep(unix.CLOCK_MONOTONIC, unix.TIMER_ABSTIME, &ts, nil)
		late[i] = p.clock.now() - want
	}
	slices.Sort(late[:])
	p.wake = min(max(late[len(late)/2], 0), int64(maxWake))
	p.wakeSeen.Store(p.wake)
}

// fail records the first error that stopped a thread.
func (p *pipe) fail(err error) { p.err.CompareAndSwap(nil, &err) }

// flow returns the pipe's counters.
func (p *pipe) flow() Flow {
	f := Flow{
		Packets:    p.packets.Load(),
		Bytes:      p.bytes.Load(),
		Dropped:    p.dropped.Load(),
		Overflowed: p.overflowed.Load(),
		Refused:    p.refused.Load(),
		MaxLate:    time.Duration(p.lateMax.Load()),
		Wake:       time.Duration(p.wakeSeen.Load()),
	}
	if n := f.Packets + f.Refused; n > 0 {
		f.MeanLate = time.Duration(p.lateSum.Load() / int64(n))
	}
	if f.CPU = time.Duration(p.cpu.Load()); f.CPU == 0 && p.tid.Load() > 0 {
		f.CPU = time.Duration(max(threadCPU(int(p.tid.Load())), 0))
	}
	if err := p.err.Load(); err != nil {
		f.Err = *err
	}
	return f
}

// threadCPU returns the CPU time, in ns, of thread tid of this process, or
// of the calling thread for -1; -1 when it cannot be read.
func threadCPU(tid int) int64 {
	path := "/proc/thread-self/schedstat"
	if tid >= 0 {
		path = "/proc/self/task/" + strconv.Itoa(tid) + "/schedstat"
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return -1
	}
	f, _, _ := strings.Cut(string(b), " ")
	v, err := strconv.ParseInt(f, 10, 64)
	if err != nil {
		return -1
	}
	return v
}

// signal adds one to eventfd fd. It cannot fail but by overflowing the
// counter, which leaves the eventfd readable all the same.
func signal(fd int) {
	one := [8]byte{1}
	unix.Write(fd, one[:])
}

// clock reads CLOCK_MONOTONIC, the clock clock_nanosleep sleeps on, through
// Go's monotonic time, which is the same clock read without a system call.
type clock struct {
	base  time.Time
	mono0 int64 // CLOCK_MONOTONIC at base, ns
}

func newClock() (*clock, error) {
	var before, after unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &before); err != nil {
		return nil, err
	}
	base := time.Now()
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &after); err != nil {
		return nil, err
	}
	return &clock{base: base, mono0: (before.Nano() + after.Nano()) / 2}, nil
}

// now returns CLOCK_MONOTONIC in ns.
func (c *clock) now() int64 { return c.mono0 + int64(time.Since(c.base)) }
