package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestMediansOfRepeatedRuns(t *testing.T) {
	dir := t.TempDir()
	file := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// Three runs of two sizes; the medians are 20 us at 8 B and 300 us at 1 MiB.
	g := file("g", `# run 1
allreduce 2 8 2 float32 sum recdbl 30.0 0 0 N/A
allreduce 2 1048576 262144 float32 sum ring 300.0 3.5 3.5 N/A
# run 2
allreduce 2 8 2 float32 sum recdbl 10.0 0 0 N/A
allreduce 2 1048576 262144 float32 sum ring 900.0 1.1 1.1 N/A
# run 3
allreduce 2 8 2 float32 sum recdbl 20.0 0 0 N/A
allreduce 2 1048576 262144 float32 sum ring 200.0 5.2 5.2 N/A
`)
	o := file("o", `allreduce 2 8 2 float32 sum - 10.0 0 0 0
allreduce 2 1048576 262144 float32 sum - 600.0 1.75 1.75 0
`)
	var out strings.Builder
	if err := run([]string{"allreduce np 2", g, o}, "", "", &out); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("want a header and 2 rows, got:\n%s", out.String())
	}
	for i, want := range [][]string{{"8", "20.00", "10.00", "2.00"}, {"1048576", "300.00", "600.00", "0.50", "3.500", "1.750", "2.00"}} {
		fs := strings.Fields(lines[i+1])[3:]
		for _, w := range want {
			if !slices.Contains(fs, w) {
				t.Errorf("row %d %v: want %s in it", i, fs, w)
			}
		}
	}
}
