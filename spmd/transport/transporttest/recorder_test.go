package transporttest

import (
	"errors"
	"testing"

	"github.com/gorun-hpc/gorun/spmd/transport"
)

// fakeTB records failures instead of ending the test.
type fakeTB struct {
	testing.TB
	errors []string
}

func (f *fakeTB) Helper()                           {}
func (f *fakeTB) Errorf(format string, args ...any) { f.errors = append(f.errors, format) }

func TestRecorderRecords(t *testing.T) {
	r := NewRecorder()
	h := transport.Header{Tag: 4, Len: 3}
	buf := r.Buffer(1, h)
	if len(buf) != 3 {
		t.Fatalf("Buffer gave %d bytes, want 3", len(buf))
	}
	copy(buf, "abc")
	r.Deliver(1, h, buf)
	got := r.WaitMsgs(t, 1)
	if len(got) != 1 || got[0].Peer != 1 || got[0].Header != h || string(got[0].Data) != "abc" {
		t.Fatalf("got %+v", got)
	}
	cause := errors.New("gone")
	r.Lost(1, cause)
	if err := r.WaitLost(t, 1); err != cause {
		t.Fatalf("WaitLost = %v, want %v", err, cause)
	}
	if r.Count() != 1 || len(r.Losses()) != 1 {
		t.Fatalf("Count %d, Losses %v", r.Count(), r.Losses())
	}
	r.CheckRules(t)
}

func TestRecorderBufferFor(t *testing.T) {
	r := NewRecorder()
	mine := make([]byte, 8)
	r.BufferFor = func(int, transport.Header) []byte { return mine }
	if got := r.Buffer(0, transport.Header{Len: 8}); &got[0] != &mine[0] {
		t.Fatal("Buffer did not use BufferFor")
	}
}

func TestRecorderRules(t *testing.T) {
	tests := []struct {
		name string
		call func(r *Recorder)
	}{
		{"Buffer after Lost", func(r *Recorder) { r.Buffer(2, transport.Header{}) }},
		{"Deliver after Lost", func(r *Recorder) { r.Deliver(2, transport.Header{}, nil) }},
		{"Lost twice", func(r *Recorder) { r.Lost(2, errors.New("again")) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := NewRecorder()
			r.Lost(2, errors.New("gone"))
			tc.call(r)
			var f fakeTB
			r.CheckRules(&f)
			if len(f.errors) != 1 {
				t.Fatalf("CheckRules reported %d breaks, want 1", len(f.errors))
			}
		})
	}
}
