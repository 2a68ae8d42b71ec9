package shm

import (
	"errors"
	"os"
	"strings"
	"testing"
)

// areaFiles lists the shared areas' files of job.
func areaFiles(tb testing.TB, job string) []string {
	var out []string
	for _, f := range jobFiles(tb, job) {
		if strings.HasPrefix(f, Dir+"/gorun-"+job+"-s") {
			out = append(out, f)
		}
	}
	return out
}

// The ranks that share a key share its memory, zero at first; the file
// goes once the last of them has mapped it.
func TestShare(t *testing.T) {
	c := newCluster(t, 3)
	all := []int{0, 1, 2}
	m0, err := c.ts[0].Share("k", all, 4096)
	if err != nil {
		t.Fatal(err)
	}
	if len(m0) != 4096 || m0[0] != 0 || m0[4095] != 0 {
		t.Fatalf("rank 0 got %d bytes, first %d last %d; want 4096 zeros", len(m0), m0[0], m0[4095])
	}
	m0[100] = 7
	if n := len(areaFiles(t, c.job)); n != 1 {
		t.Fatalf("%d area files while rank 0 alone mapped it, want 1", n)
	}
	m1, err := c.ts[1].Share("k", all, 4096)
	if err != nil {
		t.Fatal(err)
	}
	if m1[100] != 7 {
		t.Fatalf("rank 1 reads %d where rank 0 wrote 7", m1[100])
	}
	m1[200] = 9
	if m0[200] != 9 {
		t.Fatalf("rank 0 reads %d where rank 1 wrote 9", m0[200])
	}
	if _, err := c.ts[2].Share("k", all, 4096); err != nil {
		t.Fatal(err)
	}
	if left := areaFiles(t, c.job); len(left) != 0 {
		t.Fatalf("area files left once every rank mapped it: %v", left)
	}

	again, err := c.ts[0].Share("k", all, 4096)
	if err != nil || &again[0] != &m0[0] {
		t.Fatalf("Share again: %p, %v; want the same memory %p", again, err, m0)
	}
	if _, err := c.ts[0].Share("k", all, 8192); err == nil {
		t.Fatal("Share of a mapped key with another size: no error")
	}
	if c.ts[0].Shares([]int{0, 3}) {
		t.Fatal("Shares with a rank of another host: true")
	}
	if _, err := c.ts[0].Share("x", []int{1, 2}, 64); err == nil {
		t.Fatal("Share among ranks that leave this one out: no error")
	}
}

// A file under an area's name that the ranks did not make, or that does not
// fit the area, is refused; Cleanup removes an area whose ranks never all
// mapped it.
func TestShareRefusesAndCleanup(t *testing.T) {
	c := newCluster(t, 2)
	path := sharePath(Dir, c.job, "planted", c.secret)
	if err := os.WriteFile(path, []byte("abc"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ts[0].Share("planted", []int{0, 1}, 4096); !errors.Is(err, errAuth) {
		t.Fatalf("Share over a planted file of 3 bytes: %v, want errAuth", err)
	}
	os.Remove(path)

	if _, err := c.ts[0].Share("half", []int{0, 1}, 4096); err != nil {
		t.Fatal(err)
	}
	if n := len(areaFiles(t, c.job)); n != 1 {
		t.Fatalf("%d area files while one of two ranks mapped it, want 1", n)
	}
	if err := Cleanup(c.job); err != nil {
		t.Fatal(err)
	}
	if left := areaFiles(t, c.job); len(left) != 0 {
		t.Fatalf("after Cleanup: %v", left)
	}
}
