package shm

import (
	"errors"
	"fmt"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// hugeSize is the size of a transparent huge page (x86-64, and arm64 with
// 4 KiB base pages).
const hugeSize = 2 << 20

// madvCollapse is MADV_COLLAPSE (Linux 6.1), missing from x/sys/unix.
const madvCollapse = 25

// collapseAfter is how many single-copy sends must have offered a 2 MiB
// piece of memory before it is collapsed: memory sent from twice is
// likely sent from again (a training loop's gradients, a benchmark's
// buffers), and a one-off send should not pay for the collapse.
const collapseAfter = 2

// collapsePerSend bounds the pieces one send collapses, so that no send
// stalls for long (the kernel collapses at about 1 GB/s here: 2 ms a
// piece); a large buffer is collapsed over its next few sends.
const collapsePerSend = 8

// collapseTries bounds the attempts on one piece that the kernel refuses
// for a passing reason (its pages pinned by a reader, no huge page free).
const collapseTries = 4

// maxPieces bounds the pieces remembered: a program that keeps sending
// from new memory starts the count again rather than growing it.
const maxPieces = 1 << 14

// hugepager collapses into transparent huge pages the memory that
// single-copy sends offer again and again. The receiver's
// process_vm_readv pins the sender's pages one by one before it copies
// them; from 2 MiB pages it copied 1.5-1.8x faster (6.5-6.8 against
// 3.7-4.0 GB/s, 256 KiB reads of an 8 MiB buffer another core wrote). Go's
// heap, like malloc's, gets huge pages only when asked on a host whose THP
// setting is "madvise", the common default, so a user's buffers have 4
// KiB pages. MADV_COLLAPSE rebuilds a piece's pages in place, contents
// unchanged; it copies the piece once, which a reused buffer pays back
// within a send or two. A piece is the aligned 2 MiB around any part of a
// payload, so up to 2 MiB of the process's memory next to a payload may
// be collapsed with it (and pages of it not yet touched made resident).
// Where the kernel cannot collapse (no THP, no MADV_COLLAPSE, memory that
// is not anonymous), the piece is given up after one try.
//
// A collapsed piece does not stay huge for good: when the memory is freed
// and reused, Go's scavenger or free splits it again. A collapsed piece is
// therefore collapsed again every recollapseEvery sends, which costs a
// syscall while it is still huge.
type hugepager struct {
	off    bool // WithHugePages(false): note does nothing
	mu     sync.Mutex
	pieces map[uintptr]piece
	stats  hugeStats
}

// hugeStats counts what the kernel answered, for the verbose log.
type hugeStats struct {
	collapsed, refused, failed int
	nanos                      time.Duration // spent collapsing
}

// piece is what the hugepager knows of one 2 MiB piece.
type piece struct {
	sends  int8 // single-copy sends that offered it, up to collapseAfter
	fails  int8 // passing failures to collapse it
	done   bool // collapsed
	gaveUp bool // cannot be collapsed
	since  int8 // sends since it was collapsed
}

// recollapseEvery is how many sends of a collapsed piece pass before it is
// collapsed again.
const recollapseEvery = 64

// note counts a single-copy send of payload and collapses the pieces it
// touches that have reached collapseAfter, at most collapsePerSend.
func (h *hugepager) note(payload []byte) {
	if h.off || len(payload) == 0 {
		return
	}
	start := uintptr(unsafe.Pointer(unsafe.SliceData(payload)))
	first := start &^ (hugeSize - 1)
	end := start + uintptr(len(payload))
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.pieces == nil || len(h.pieces) >= maxPieces {
		h.pieces = make(map[uintptr]piece)
	}
	budget := collapsePerSend
	for b := first; b < end; b += hugeSize {
		p := h.pieces[b]
		switch {
		case p.gaveUp:
			continue
		case p.done:
			if p.since++; p.since < recollapseEvery {
				h.pieces[b] = p
				continue
			}
			p.since = 0
		case p.sends < collapseAfter:
			p.sends++
		}
		if p.sends >= collapseAfter && budget > 0 {
			budget--
			h.collapse(b, &p)
		}
		h.pieces[b] = p
	}
}

// collapse collapses the piece at base and records the answer in p.
func (h *hugepager) collapse(base uintptr, p *piece) {
	t := time.Now()
	err := collapse(base)
	h.stats.nanos += time.Since(t)
	switch {
	case err == nil:
		p.done = true
		h.stats.collapsed++
	case errors.Is(err, unix.EAGAIN), errors.Is(err, unix.ENOMEM):
		h.stats.failed++
		p.fails++
		p.gaveUp = p.fails >= collapseTries
	default: // EINVAL, EPERM...: this memory cannot be collapsed
		h.stats.refused++
		p.gaveUp = true
	}
}

// summary returns the stats so far.
func (h *hugepager) summary() hugeStats {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.stats
}

// String summarizes the stats for the log.
func (s hugeStats) String() string {
	return fmt.Sprintf("%d huge-page collapses, %d failed, %d refused, in %v",
		s.collapsed, s.failed, s.refused, s.nanos.Round(time.Microsecond))
}

// collapse asks the kernel to back the 2 MiB at base with a huge page.
func collapse(base uintptr) error {
	_, _, e := unix.Syscall(unix.SYS_MADVISE, base, hugeSize, madvCollapse)
	if e != 0 {
		return e
	}
	return nil
}
