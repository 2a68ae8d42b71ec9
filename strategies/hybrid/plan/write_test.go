package plan

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// goldenMachine is a fixed machine for the golden table: a CPU rank of
// 50 GFLOP/s, shared memory inside a host, 10 GbE between hosts.
var goldenMachine = Machine{
	Flops:     5e10,
	AlphaNear: 5e-6, BetaNear: 1 / 5e9,
	AlphaFar: 40e-6, BetaFar: 1 / 1.2e9,
	MemBandwidth: 1e10,
}

func TestWriteGolden(t *testing.T) {
	job := rankJob()
	job.RanksPerHost = 4
	job.MemPerRank = 160 << 20
	es, err := Rank(job, goldenMachine)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := Write(&buf, es, 20); err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "rank_small.golden")
	if *update {
		if err := os.WriteFile(golden, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v: run go test -update to write it", err)
	}
	if !bytes.Equal(buf.Bytes(), want) {
		t.Errorf("table differs from %s (go test -update rewrites it):\n%s", golden, buf.String())
	}
}

func TestWriteErrors(t *testing.T) {
	if err := Write(&bytes.Buffer{}, nil, 5); !errors.Is(err, ErrNoLayout) {
		t.Errorf("no estimates: got %v, want ErrNoLayout", err)
	}
	es, err := Rank(smallJob(), goldenMachine)
	if err != nil {
		t.Fatal(err)
	}
	if err := Write(failWriter{}, es, 3); !errors.Is(err, errWrite) {
		t.Errorf("failing writer: got %v, want its error", err)
	}
}

var errWrite = errors.New("disk full")

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errWrite }
