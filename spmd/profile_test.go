package spmd

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/gorun-hpc/gorun/spmd/trace"
)

// TestKeepEarlierStart: a restarted job's rank moves its trace and CPU
// profile of an earlier start to DIR/start.K, K the start whose header
// wrote it (the previous one when it cannot be read), before it opens its
// own; on a first start, or with no file there, it moves nothing.
func TestKeepEarlierStart(t *testing.T) {
	for _, tc := range []struct {
		name    string
		restart int // this start
		wrote   int // the start that wrote the file there; -1: garbage, -2: no file
		want    string
	}{
		{"first start", 0, 0, ""},
		{"after the first", 1, 0, "start.0"},
		{"a start that left no trace", 2, 0, "start.0"},
		{"after the second", 2, 1, "start.1"},
		{"unreadable", 2, -1, "start.1"},
		{"no file", 1, -2, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			env := Env{Rank: 1, Size: 2, ProfileDir: dir, RestartCount: tc.restart}
			trc, cpu := trace.FileName(1), cpuProfileName(1)
			switch tc.wrote {
			case -2:
			case -1:
				os.WriteFile(filepath.Join(dir, trc), []byte("garbage"), 0o644)
			default:
				rec, err := trace.New(dir, trace.Header{Rank: 1, Size: 2, Restart: tc.wrote})
				if err != nil {
					t.Fatal(err)
				}
				rec.Close()
				os.WriteFile(filepath.Join(dir, cpu), []byte("pprof"), 0o644)
			}
			if err := keepEarlierStart(env); err != nil {
				t.Fatal(err)
			}
			for _, name := range []string{trc, cpu} {
				_, err := os.Stat(filepath.Join(dir, name))
				moved := tc.want != "" || tc.wrote == -2
				if moved != os.IsNotExist(err) {
					t.Errorf("%s in DIR: %v; want it moved: %v", name, err, moved)
				}
			}
			if tc.want == "" {
				return
			}
			if _, err := os.Stat(filepath.Join(dir, tc.want, trc)); err != nil {
				t.Errorf("the earlier trace is not in %s: %v", tc.want, err)
			}
			if tc.wrote >= 0 {
				if _, err := os.Stat(filepath.Join(dir, tc.want, cpu)); err != nil {
					t.Errorf("the earlier CPU profile is not in %s: %v", tc.want, err)
				}
			}
		})
	}
}
