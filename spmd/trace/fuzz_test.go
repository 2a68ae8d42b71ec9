package trace_test

import (
	"bytes"
	"context"
	"testing"

	"github.com/gorun-hpc/gorun/spmd/trace"
)

// FuzzRead decodes arbitrary bytes: the decoder must not panic, and a file
// it accepts whole must hold together.
func FuzzRead(f *testing.F) {
	var seeds [][]byte
	sample, _ := sampleTrace(f)
	seeds = append(seeds, sample)

	// An empty trace, and one of regions, heap samples and many strings.
	empty := newRecorder(f, trace.Header{})
	closeAndRead(f, empty)
	seeds = append(seeds, fileBytes(f, empty.Path()))
	regions := newRecorder(f, trace.Header{Rank: 3, Size: 4})
	ctx := trace.WithTrack(trace.WithRecorder(context.Background(), regions), "loader")
	for i := range 20 {
		s := trace.Region(ctx, string(rune('a'+i)))
		regions.Record(trace.Event{Kind: trace.CollectiveEvent, Comm: 1, Seq: regions.NextSeq(1), Start: regions.Now(), Site: regions.Site()}, "bcast", "tree")
		s.End()
	}
	closeAndRead(f, regions)
	seeds = append(seeds, fileBytes(f, regions.Path()))

	for _, s := range seeds {
		f.Add(s)
		for _, n := range []int{len(trace.Magic), len(s) / 3, len(s) / 2, len(s) - 1} {
			f.Add(s[:n])
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		file, err := trace.Read(bytes.NewReader(b))
		if file == nil {
			t.Fatalf("Read returned no File (error %v)", err)
		}
		if err != nil {
			if file.Done {
				t.Errorf("Done with an error: %v", err)
			}
			return
		}
		if !file.Done {
			t.Error("Read succeeded without the end record")
		}
		if err := check(file); err != nil {
			t.Error(err)
		}
	})
}
