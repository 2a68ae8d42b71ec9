// Package delayline emulates a network link between two Linux network
// namespaces in user space: a rate and a one-way delay, as netem would
// give, for kernels that lack sch_netem.
//
// New creates a TUN device, Device, in each namespace and routes each
// host's traffic to the other host's address through it (a /32 route, more
// specific than the hosts' shared subnet), so that every program's packets
// between the two take the line without being changed. Each direction has
// a thread that reads a packet from one device and gives it a due time the
// way netem does: it leaves the link once the link has sent what came
// before it and itself, at the rate, and arrives the delay after; a packet
// that would make the bytes waiting to leave exceed the limit is dropped.
// The same thread hands each packet to the other device at its due time,
// waiting in ppoll for whichever comes first: a packet, the oldest
// packet's due time or Close. Due times only grow, so the packets of a
// direction wait in a ring buffer, in order, and are read into and written
// out of it with no copy in user space and no allocation.
//
// The kernel wakes a sleeping thread late: some 60 us on the 2-core
// virtual machine this was written on, whatever the timer slack (set to
// 1 ns) or the scheduling class, and each timed wake-up costs some 25 us of
// CPU there. The thread measures that latency when it starts (the median
// of a few sleeps of 100 us), keeps tracking it (a running median of its
// timed waits of 20 us or more, at most 100 us) and asks to wake that much
// before a packet is due; from there to the due time, and for a packet due
// sooner than the latency, it takes the briefest sleeps the kernel has (a
// ppoll of 1 ns, some 20 us there). No packet leaves before its due time,
// and most leave within some tens of microseconds after it rather than
// always late by the latency. Stats reports how late, on average and at
// most, with the CPU time each direction took. The line's own latency, the
// thread's wake-up when a packet comes and the extra trip through the
// kernel, adds to the delay and is not made up for: some 10 to 15 us each
// way at best, measured with a delay of 0.
//
// Each of a line's two threads blocks in a system call most of its life,
// holding a P of the Go scheduler; New raises GOMAXPROCS by two until Close,
// so that they do not keep the process's other goroutines waiting, nor
// wait for a P when they wake.
//
// Close stops the threads and closes the devices, which takes their routes
// with them. The line needs root (CAP_NET_ADMIN in the namespaces), iproute2
// and /dev/net/tun.
package delayline
