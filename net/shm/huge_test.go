package shm

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// anonHuge returns the AnonHugePages of the mapping that holds addr, in
// bytes, from /proc/self/smaps.
func anonHuge(t *testing.T, addr uintptr) int {
	t.Helper()
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Skipf("skipping: no /proc/self/smaps: %v", err)
	}
	defer f.Close()
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if lo, hi, ok := strings.Cut(strings.Fields(line)[0], "-"); ok && !strings.HasSuffix(line, ":") {
			a, err1 := strconv.ParseUint(lo, 16, 64)
			b, err2 := strconv.ParseUint(hi, 16, 64)
			if err1 == nil && err2 == nil {
				in = uint64(addr) >= a && uint64(addr) < b
				continue
			}
		}
		if in && strings.HasPrefix(line, "AnonHugePages:") {
			kb, err := strconv.Atoi(strings.Fields(line)[1])
			if err != nil {
				t.Fatalf("smaps: %q: %v", line, err)
			}
			return kb << 10
		}
	}
	t.Fatalf("no mapping holds %#x in /proc/self/smaps", addr)
	return 0
}

// hugeBuffer maps n bytes of anonymous memory starting on a 2 MiB boundary,
// every page touched.
func hugeBuffer(t *testing.T, n int) []byte {
	t.Helper()
	m, err := unix.Mmap(-1, 0, n+hugeSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Munmap(m) })
	base := uintptr(unsafe.Pointer(&m[0]))
	off := int((hugeSize - base%hugeSize) % hugeSize)
	b := m[off : off+n]
	for i := range b {
		b[i] = byte(i)
	}
	return b
}

// TestHugepagerCollapsesReusedMemory: memory offered once stays as it is;
// offered again, its pieces are collapsed into huge pages, at most
// collapsePerSend per send, with the contents unchanged.
func TestHugepagerCollapsesReusedMemory(t *testing.T) {
	const pieces = collapsePerSend + 4
	probe := hugeBuffer(t, hugeSize)
	if err := collapse(uintptr(unsafe.Pointer(&probe[0]))); err != nil {
		t.Skipf("skipping: this kernel does not collapse anonymous memory into huge pages (MADV_COLLAPSE: %v)", err)
	}
	b := hugeBuffer(t, pieces*hugeSize)
	addr := uintptr(unsafe.Pointer(&b[0]))
	// The mapping may have merged with the probe's: count what changes.
	base := anonHuge(t, addr)
	huge := func() int { return anonHuge(t, addr) - base }
	var h hugepager
	h.note(b)
	if got := huge(); got != 0 {
		t.Fatalf("after one send: %d bytes in huge pages, want 0", got)
	}
	h.note(b)
	if got, want := huge(), collapsePerSend*hugeSize; got != want {
		t.Fatalf("after two sends: %d bytes in huge pages, want %d (collapsePerSend pieces)", got, want)
	}
	h.note(b[hugeSize+1 : 3*hugeSize]) // collapsed pieces only: nothing to do
	h.note(b)
	if got, want := huge(), pieces*hugeSize; got != want {
		t.Fatalf("after three sends: %d bytes in huge pages, want %d", got, want)
	}
	// Collapsed pieces are collapsed again now and then, in case they were
	// split meanwhile.
	before := h.summary().collapsed
	for range recollapseEvery {
		h.note(b)
	}
	if got := h.summary().collapsed - before; got != pieces {
		t.Errorf("after %d more sends: %d pieces collapsed again, want %d", recollapseEvery, got, pieces)
	}
	for i := range b {
		if b[i] != byte(i) {
			t.Fatalf("byte %d is %d after the collapse, want %d", i, b[i], byte(i))
		}
	}
}

// TestHugepagerGivesUp: memory the kernel cannot collapse (a shared file
// mapping) is tried once and then left alone.
func TestHugepagerGivesUp(t *testing.T) {
	f, err := os.CreateTemp(t.TempDir(), "huge")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(2 * hugeSize); err != nil {
		t.Fatal(err)
	}
	m, err := unix.Mmap(int(f.Fd()), 0, 2*hugeSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(m)
	var h hugepager
	for range 3 {
		h.note(m)
	}
	for b, p := range h.pieces {
		if !p.done && !p.gaveUp {
			t.Errorf("piece %#x: %+v, want it collapsed or given up", b, p)
		}
		if p.fails > 1 {
			t.Errorf("piece %#x: tried %d times", b, p.fails)
		}
	}
}
