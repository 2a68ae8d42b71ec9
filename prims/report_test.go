package prims

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gorun-hpc/gorun/spmd"
	"github.com/gorun-hpc/gorun/spmd/spmdtest"
	"github.com/gorun-hpc/gorun/topo"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// TestFormatGolden: gorun --topo's report (format) of fixed machines, the
// algorithm chosen per collective and size among them, against golden
// files.
func TestFormatGolden(t *testing.T) {
	tests := []struct {
		name           string
		hosts, perHost int
		model          topo.Model
		shared         bool   // the ranks share memory (Layout.Shared)
		tab            *tuned // a decision table
	}{
		{"1x4", 1, 4, goldenModel, false, nil},
		{"1x8", 1, 8, goldenModel, false, nil},
		{"3x2", 3, 2, goldenModel, false, nil},
		{"2x4", 2, 4, goldenModel, false, nil},
		{"1x8-2cores", 1, 8, oversubscribed(), false, nil},
		{"1x4-2cores-pull", 1, 4, pulling(), false, nil},
		{"1x5", 1, 5, goldenModel, false, nil},
		{"1x4-2cores-shared", 1, 4, pulling(), true, nil},
		{"1x2-shared", 1, 2, pulling(), true, nil},
		{"1x4-table", 1, 4, goldenModel, false, &tuned{source: "tune.toml, measured on test", steps: [len(applicable)][]tunedStep{
			topo.AllReduce: {{8, topo.Linear}, {4096, topo.Ring}},
			topo.Barrier:   {{0, topo.Tree}},
		}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b bytes.Buffer
			lay := topo.Uniform(tt.hosts, tt.perHost)
			lay.Shared = tt.shared
			if err := format(&b, tt.model, tt.tab, lay, nil); err != nil {
				t.Fatal(err)
			}
			golden(t, filepath.Join("testdata", tt.name+".golden"), b.Bytes())
		})
	}
}

func golden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to write it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs (go test -update rewrites it)\ngot:\n%s\nwant:\n%s", path, got, want)
	}
}

func TestTableCovers(t *testing.T) {
	for _, coll := range topo.Collectives {
		tab := table(goldenModel, nil, coll, 6, topo.Uniform(3, 2))
		if tab[0].from != tableMin || tab[len(tab)-1].to != tableMax {
			t.Errorf("%s table %v does not span %d..%d", coll, tab, tableMin, tableMax)
		}
		for i := 1; i < len(tab); i++ {
			if tab[i].from != 2*tab[i-1].to || tab[i].algo == tab[i-1].algo {
				t.Errorf("%s table %v: ranges %d and %d do not follow on", coll, tab, i-1, i)
			}
		}
	}
}

func TestReport(t *testing.T) {
	var out [3]bytes.Buffer
	spmdtest.Run(t, 3, func(ctx context.Context, w *spmd.World) error {
		return Report(ctx, w, &out[w.Rank()])
	})
	if !strings.Contains(out[0].String(), "# 3 ranks on 1 host") || !strings.Contains(out[0].String(), "allreduce") {
		t.Errorf("rank 0 wrote:\n%s", out[0].String())
	}
	if out[1].Len()+out[2].Len() != 0 {
		t.Errorf("ranks other than 0 wrote %q, %q", out[1].String(), out[2].String())
	}
}
