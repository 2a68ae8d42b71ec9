package workload

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestWritableDir: a --ckpt that cannot hold checkpoints is an error
// naming --ckpt, the path and what to pass; a good one, missing or not,
// is created and left with nothing in it.
func TestWritableDir(t *testing.T) {
	tmp := t.TempDir()
	file := filepath.Join(tmp, "afile")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	ro := filepath.Join(tmp, "ro")
	if err := os.Mkdir(ro, 0o555); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, dir, want string
		asRoot          bool // the case holds for root too
	}{
		{"a file", file, "--ckpt " + file + ": it is a file, not a directory: pass a directory", true},
		{"under a file", filepath.Join(file, "ck"), "--ckpt " + file + "/ck: cannot create the directory, a part of its path is a file", true},
		{"under a read-only directory", filepath.Join(ro, "ck"), "--ckpt " + ro + "/ck: cannot create the directory", false},
		{"a read-only directory", ro, "--ckpt " + ro + ": cannot write in the directory", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if !tc.asRoot && os.Geteuid() == 0 {
				t.Skip("root writes in read-only directories")
			}
			err := WritableDir(tc.dir)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "pass a directory") {
				t.Errorf("%v, want an error saying %q and what to pass", err, tc.want)
			}
		})
	}
	for _, dir := range []string{filepath.Join(tmp, "new", "ck"), tmp} {
		if err := WritableDir(dir); err != nil {
			t.Errorf("%s: %v", dir, err)
		}
		if ents, err := os.ReadDir(dir); err != nil || dir != tmp && len(ents) != 0 {
			t.Errorf("%s holds %v (%v) after the check, want it empty", dir, ents, err)
		}
	}
}
