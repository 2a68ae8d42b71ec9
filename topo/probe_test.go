package topo

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"testing"

	"github.com/gorun-hpc/gorun/spmd"
	"github.com/gorun-hpc/gorun/spmd/contract"
	"github.com/gorun-hpc/gorun/spmd/spmdtest"
)

func TestFitLink(t *testing.T) {
	want := Link{Alpha: 20e-6, Beta: 1 / 2e9}
	ns := []float64{8, 64 << 10, 256 << 10}
	ts := make([]float64, len(ns))
	for i, n := range ns {
		ts[i] = want.Time(n)
	}
	got := fitLink(ns, ts)
	if math.Abs(got.Alpha-want.Alpha) > 1e-9 || math.Abs(got.Beta-want.Beta)/want.Beta > 1e-6 {
		t.Errorf("fitLink = %+v, want %+v", got, want)
	}
	// Noise that makes the slope negative must not give a negative beta.
	if got := fitLink(ns, []float64{3e-5, 2e-5, 1e-5}); !(got.Beta > 0 && got.Alpha > 0) {
		t.Errorf("fitLink of a falling line = %+v, want positive constants", got)
	}
}

func TestModelEncoding(t *testing.T) {
	m := pulling()
	m.Round = 3e-6
	got, err := decodeModel(encodeModel(m))
	if err != nil || got != m {
		t.Errorf("decode(encode(%+v)) = %+v, %v", m, got, err)
	}
	bad := m
	bad.Gamma = math.NaN()
	if _, err := decodeModel(encodeModel(bad)); err == nil {
		t.Error("decoding a NaN gamma succeeded")
	}
}

func TestProbePairs(t *testing.T) {
	tests := []struct {
		name          string
		lay           Layout
		local, remote string
	}{
		{"one host", Uniform(1, 4), "[0 1]", "[]"},
		{"two hosts", Uniform(2, 4), "[0 1]", "[0 4]"},
		{"alone on host 0", FromHostIDs([]string{"a", "b", "b"}), "[1 2]", "[0 1]"},
		{"one rank per host", Uniform(3, 1), "[]", "[0 1]"},
	}
	for _, tt := range tests {
		l, r := probePairs(tt.lay)
		if fmt.Sprint(l) != tt.local || fmt.Sprint(r) != tt.remote {
			t.Errorf("%s: probePairs = %v, %v, want %s, %s", tt.name, l, r, tt.local, tt.remote)
		}
	}
}

// TestProbeAgrees probes over goroutine ranks on two fake hosts and checks
// that every rank holds rank 0's constants, that both classes were
// measured, and that a communicator split from the world inherits them.
func TestProbeAgrees(t *testing.T) {
	hosts := []string{"a", "a", "a", "b", "b", "c"}
	models := make([]Model, len(hosts))
	spmdtest.RunHosts(t, hosts, func(ctx context.Context, w *spmd.World) error {
		m, err := ModelFor(ctx, w.Comm)
		if err != nil {
			return err
		}
		models[w.Rank()] = m
		sub, err := w.Split(ctx, w.Rank()%2, 0)
		if err != nil {
			return err
		}
		if got, ok := sub.Value(modelKey{}).(Model); !ok || got != m {
			return fmt.Errorf("split communicator has model %+v, want %+v", got, m)
		}
		if got := LayoutOf(sub); got.Size() != sub.Size() {
			return fmt.Errorf("split communicator of %d ranks has the parent's layout of %d", sub.Size(), got.Size())
		}
		return nil
	})
	for r, m := range models {
		if m != models[0] {
			t.Errorf("rank %d model %+v, rank 0 %+v", r, m, models[0])
		}
	}
	if m := models[0]; !m.LocalProbed || !m.RemoteProbed || !m.Valid() {
		t.Errorf("model %+v: want both classes measured and valid constants", m)
	}
	if m := models[0]; m.Round != 0 {
		t.Errorf("model of several hosts has a message round %g: it is measured on one host only", m.Round)
	}
}

// TestProbeRound: on one host whose ranks have a core each, the probe
// measures a message round (the barrier's), and every rank gets it.
func TestProbeRound(t *testing.T) {
	if contract.HostCPUs() < 2 {
		t.Skip("needs 2 cores: 2 ranks on 1 core measure a wake-up, not a round")
	}
	models := make([]Model, 2)
	spmdtest.RunHosts(t, []string{"a", "a"}, func(ctx context.Context, w *spmd.World) error {
		m, err := Probe(ctx, w.Comm)
		models[w.Rank()] = m
		return err
	})
	if m := models[0]; m.Round <= 0 || m.Wake != 0 || models[1] != m {
		t.Errorf("models %+v and %+v: want one with a message round and no wake-up", m, models[1])
	}
}

func TestProbeOneRank(t *testing.T) {
	spmdtest.Run(t, 1, func(ctx context.Context, w *spmd.World) error {
		m, err := Probe(ctx, w.Comm)
		if err == nil && !m.Valid() {
			err = fmt.Errorf("invalid model %+v", m)
		}
		return err
	})
}

// TestSteady: one lucky round does not set a probe's time, and neither does
// a stretch of slow ones.
func TestSteady(t *testing.T) {
	xs := make([]float64, 50)
	for i := range xs {
		xs[i] = 10 + float64(i%7)
	}
	xs[3] = 1                  // one lucky round in the first chunk
	for i := 20; i < 30; i++ { // the third chunk all slow
		xs[i] = 100
	}
	if got := steady(xs); got != 10 {
		t.Errorf("steady = %v, want 10 (the median of the chunks' minimums)", got)
	}
	if got := steady([]float64{5}); got != 5 {
		t.Errorf("steady of one time = %v, want it", got)
	}
}

// TestProbeLeavesNoGarbage: the probe's megabyte buffers are not on the
// Go heap, and no message of it is taken aside for coming before its
// receive. It allocated 1.5-4 MB on a 2-rank job's first collective, and
// set off the job's first garbage collection a few milliseconds later.
func TestProbeLeavesNoGarbage(t *testing.T) {
	var before, after runtime.MemStats
	spmdtest.RunHosts(t, []string{"a", "a"}, func(ctx context.Context, w *spmd.World) error {
		if err := w.Barrier(ctx); err != nil {
			return err
		}
		if w.Rank() == 0 {
			runtime.ReadMemStats(&before)
		}
		if err := w.Barrier(ctx); err != nil {
			return err
		}
		if _, err := Probe(ctx, w.Comm); err != nil {
			return err
		}
		if err := w.Barrier(ctx); err != nil {
			return err
		}
		if w.Rank() == 0 {
			runtime.ReadMemStats(&after)
		}
		return nil
	})
	// The small messages' unexpected buffers, the timings and the model's
	// broadcast are a few kilobytes; one buffer of the largest message is
	// 1 MiB.
	got := after.TotalAlloc - before.TotalAlloc
	t.Logf("the probe of 2 ranks allocated %d bytes", got)
	if got > 256<<10 {
		t.Errorf("the probe of 2 ranks allocated %d bytes on the heap, want under 256 KiB", got)
	}
}
