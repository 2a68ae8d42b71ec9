package trace_test

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gorun-hpc/gorun/spmd/trace"
)

// The record kinds of format version 2, as files hold them: a test encodes
// records by hand with them, independently of the recorder.
const (
	recHeader byte = iota + 1
	recString
	recComm
	recClock
	recEvent
	recEnd
)

func uv(v uint64) []byte { return binary.AppendUvarint(nil, v) }
func sv(v int64) []byte  { return binary.AppendVarint(nil, v) }

// record is a record of kind k whose payload is the concatenation of ps.
func record(k byte, ps ...[]byte) []byte {
	p := bytes.Join(ps, nil)
	return slices.Concat([]byte{k}, uv(uint64(len(p))), p)
}

func header(version, rank, size int) []byte {
	h, err := json.Marshal(trace.Header{Version: version, Rank: rank, Size: size, Host: "h", Start: time.Unix(0, 0).UTC()})
	if err != nil {
		panic(err)
	}
	return record(recHeader, h)
}

// region is a region event record: start is the delta from the last
// event's start.
func region(start int64, dur uint64, name uint64) []byte {
	return record(recEvent, []byte{byte(trace.RegionEvent), 0}, uv(0), sv(start), uv(dur), uv(name))
}

func end(n uint64, t uint64) []byte { return record(recEnd, uv(n), uv(t)) }

// file is a trace file: the magic, then records.
func file(recs ...[]byte) []byte {
	return slices.Concat(append([][]byte{[]byte(trace.Magic)}, recs...)...)
}

// TestReadHandMade decodes files encoded by hand from the format's
// description in doc.go.
func TestReadHandMade(t *testing.T) {
	b := file(
		header(2, 1, 2),
		record(recString, uv(1), []byte("forward")),
		record(recString, uv(2), []byte("")), // an empty string of its own
		record(recComm, uv(3), uv(2), uv(1), uv(0)),
		record(recClock, sv(-250), uv(40)),
		region(100, 50, 1),
		region(-30, 0, 2),
		record(recEvent, []byte{byte(trace.CollectiveEvent), byte(trace.NonBlocking)}, uv(1), sv(200), uv(7), uv(3), uv(1), uv(0), uv(64), uv(5), uv(6), uv(1)),
		record(recEvent, []byte{byte(trace.SendEvent), byte(trace.Failed)}, uv(0), sv(1), uv(2), uv(3), sv(-1), sv(-9), uv(8), uv(1), uv(0)),
		record(recEvent, []byte{byte(trace.MemoryEvent), 0}, uv(0), sv(-1000), uv(0), uv(1<<30)),
		end(5, 999),
	)
	f, err := trace.Read(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	want := []view{
		{Kind: trace.RegionEvent, Start: 100, End: 150, Peer: -1, Name: "forward"},
		{Kind: trace.RegionEvent, Start: 70, End: 70, Peer: -1},
		{Kind: trace.CollectiveEvent, Flags: trace.NonBlocking, Track: "forward", Start: 270, End: 277, Comm: 3, Peer: -1, Name: "forward", Bytes: 64, Seq: 5, Predicted: 6, Site: "forward"},
		{Kind: trace.SendEvent, Flags: trace.Failed, Start: 271, End: 273, Comm: 3, Peer: -1, Tag: -9, Bytes: 8, Site: "forward"},
		{Kind: trace.MemoryEvent, Start: -729, End: -729, Peer: -1, Bytes: 1 << 30},
	}
	var got []view
	for _, e := range f.Events {
		got = append(got, viewOf(f, e))
	}
	if !slices.Equal(got, want) {
		t.Errorf("events:\n got %+v\nwant %+v", got, want)
	}
	if f.Header.Rank != 1 || f.Header.Size != 2 || f.Header.Host != "h" || !slices.Equal(f.Strings, []string{"", "forward", ""}) ||
		!slices.Equal(f.Comms[3], []int{1, 0}) || f.Offset != -250 || f.RTT != 40 || f.Written != 5 || f.End != 999 || !f.Done {
		t.Errorf("file %+v", f)
	}
}

func TestReadErrors(t *testing.T) {
	hdr := header(2, 0, 1)
	name := record(recString, uv(1), []byte("step"))
	ok := region(10, 5, 1) // names string 1
	at := func(recs ...[]byte) string { return fmt.Sprintf("byte %d", len(file(recs...))) }
	cases := []struct {
		name   string
		b      []byte
		want   error
		msg    string // in the error
		events int    // decoded before the damage
	}{
		{"empty file", nil, trace.ErrEmpty, "empty trace file (0 bytes)", 0},
		{"part of the magic", []byte(trace.Magic[:5]), trace.ErrCorrupt, "not a gorun trace", 0},
		{"wrong magic", slices.Concat([]byte("GORUNTRX"), hdr), trace.ErrCorrupt, "not a gorun trace", 0},
		{"version 1: JSON lines", []byte(`{"version":1,"rank":0,"size":2,"host":"h","start":"2024-01-01T00:00:00Z"}` + "\n" + `{"k":1,"c":0,"p":1,"t":0,"b":8,"s":5,"e":9}` + "\n"), trace.ErrCorrupt, "a version 1 trace", 0},
		{"magic alone", file(), trace.ErrTruncated, "no header", 0},
		{"header not first", file(name, hdr), trace.ErrCorrupt, "first record (byte 8) is not the header", 0},
		{"event before the header", file(ok), trace.ErrCorrupt, "byte 8", 0},
		{"header not JSON", file(record(recHeader, []byte("{oops"))), trace.ErrCorrupt, "byte 8: header", 0},
		{"version 3 header", file(header(3, 0, 1)), trace.ErrCorrupt, "format version 3", 0},
		{"version 1 header", file(header(1, 0, 1)), trace.ErrCorrupt, "format version 1", 0},
		{"rank outside the size", file(header(2, 2, 2)), trace.ErrCorrupt, "rank 2 of 2", 0},
		{"size 0", file(header(2, 0, 0)), trace.ErrCorrupt, "rank 0 of 0", 0},
		{"no end record", file(hdr, name, ok, ok), trace.ErrTruncated, "after 2 events", 2},
		{"cut in a record's payload", file(hdr, name, ok, ok)[:len(file(hdr, name, ok, ok))-2], trace.ErrTruncated, at(hdr, name, ok) + " is cut short, after 1 events", 1},
		{"cut in a record's length", slices.Concat(file(hdr, name, ok), []byte{recEvent, 0x80}), trace.ErrTruncated, at(hdr, name, ok) + " is cut short", 1},
		{"cut after a record's kind", slices.Concat(file(hdr, name, ok), []byte{recEvent}), trace.ErrTruncated, at(hdr, name, ok) + " is cut short", 1},
		{"huge length", slices.Concat(file(hdr, name, ok), []byte{recEvent}, uv(1<<40)), trace.ErrCorrupt, at(hdr, name, ok) + " claims 1099511627776 bytes", 1},
		{"length just over the limit", slices.Concat(file(hdr, name, ok), []byte{recString}, uv(trace.MaxRecord+1)), trace.ErrCorrupt, at(hdr, name, ok) + " claims", 1},
		{"undefined string id", file(hdr, name, ok, region(1, 1, 2), end(2, 0)), trace.ErrCorrupt, at(hdr, name, ok) + ": region event: string id 2 not defined", 1},
		{"undefined track", file(hdr, record(recEvent, []byte{byte(trace.RegionEvent), 0}, uv(7), sv(0), uv(0), uv(0))), trace.ErrCorrupt, "byte " + fmt.Sprint(len(file(hdr))) + ": region event: string id 7", 0},
		{"string out of order", file(hdr, record(recString, uv(2), []byte("x"))), trace.ErrCorrupt, "string 2 defined out of order", 0},
		{"string with no id", file(hdr, record(recString)), trace.ErrCorrupt, "bad or missing integer", 0},
		{"unknown event kind", file(hdr, record(recEvent, []byte{9, 0}, uv(0), sv(0), uv(0))), trace.ErrCorrupt, "unknown event kind 9", 0},
		{"event of no kind", file(hdr, record(recEvent, []byte{0, 0}, uv(0), sv(0), uv(0))), trace.ErrCorrupt, "unknown event kind 0", 0},
		{"event too short", file(hdr, record(recEvent, []byte{byte(trace.RegionEvent)})), trace.ErrCorrupt, "event too short", 0},
		{"event missing a field", file(hdr, name, ok, record(recEvent, []byte{byte(trace.SendEvent), 0}, uv(0), sv(0), uv(0), uv(0))), trace.ErrCorrupt, at(hdr, name, ok) + ": send event: bad or missing integer", 1},
		{"negative bytes", file(hdr, record(recEvent, []byte{byte(trace.MemoryEvent), 0}, uv(0), sv(0), uv(0), uv(math.MaxUint64))), trace.ErrCorrupt, "negative size", 0},
		{"negative prediction", file(hdr, record(recEvent, []byte{byte(trace.CollectiveEvent), 0}, uv(0), sv(0), uv(0), uv(0), uv(0), uv(0), uv(0), uv(0), uv(1<<63), uv(0))), trace.ErrCorrupt, "negative size", 0},
		{"endless event", file(hdr, record(recEvent, []byte{byte(trace.RegionEvent), 0}, uv(0), sv(0), uv(1<<62+1), uv(0))), trace.ErrCorrupt, "lasts", 0},
		{"communicator with more members than bytes", file(hdr, record(recComm, uv(1), uv(5), uv(0), uv(1))), trace.ErrCorrupt, "communicator 1 claims 5 members", 0},
		{"communicator with a bad member", file(hdr, record(recComm, uv(1), uv(2), uv(0), []byte{0x80})), trace.ErrCorrupt, "bad or missing integer", 0},
		{"end record without its fields", file(hdr, name, ok, record(recEnd)), trace.ErrCorrupt, at(hdr, name, ok) + ": bad or missing integer", 1},
		{"clock record without its fields", file(hdr, record(recClock, sv(5))), trace.ErrCorrupt, "bad or missing integer", 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f, err := trace.Read(bytes.NewReader(c.b))
			if !errors.Is(err, c.want) || !strings.Contains(fmt.Sprint(err), c.msg) {
				t.Errorf("Read = %v; want an error wrapping %q and saying %q", err, c.want, c.msg)
			}
			if f == nil {
				t.Fatal("Read returned no File")
			}
			if len(f.Events) != c.events || f.Done {
				t.Errorf("decoded %d events, Done %v; want the %d before the damage", len(f.Events), f.Done, c.events)
			}
		})
	}
}

func TestReadSkipsUnknownRecords(t *testing.T) {
	hdr := header(2, 0, 1)
	name := record(recString, uv(1), []byte("step"))
	cases := []struct {
		name string
		b    []byte
	}{
		{"kind 200", file(hdr, name, record(200, []byte("a later version's record")), region(10, 5, 1), end(1, 20))},
		{"kind 7, empty", file(hdr, name, record(7), region(10, 5, 1), end(1, 20))},
		{"kind 0", file(hdr, name, region(10, 5, 1), record(0, uv(1), uv(2)), end(1, 20))},
		{"kind 255, long", file(hdr, record(255, bytes.Repeat([]byte{0xff}, 70_000)), name, region(10, 5, 1), end(1, 20))},
		{"several", file(hdr, record(200, []byte("x")), name, record(201), region(10, 5, 1), record(202, []byte("yy")), end(1, 20))},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f, err := trace.Read(bytes.NewReader(c.b))
			want := []view{{Kind: trace.RegionEvent, Start: 10, End: 15, Peer: -1, Name: "step"}}
			if err != nil || !f.Done || f.Written != 1 || f.End != 20 {
				t.Fatalf("Read: %v, Done %v, Written %d, End %d", err, f.Done, f.Written, f.End)
			}
			if got := eventsOf(f, trace.RegionEvent); !slices.Equal(got, want) || len(f.Events) != 1 {
				t.Errorf("events %+v, want %+v", got, want)
			}
		})
	}
}

// sampleTrace returns a small trace the recorder wrote, holding records of
// every kind, and its decoding.
func sampleTrace(t testing.TB) ([]byte, *trace.File) {
	t.Helper()
	var clock fakeClock
	clock.set(1)
	rec := newRecorder(t, trace.Header{Rank: 1, Size: 2, Job: "j", Host: "h"}, trace.WithClock(clock.now))
	rec.Comm(0, []int{0, 1})
	rec.Comm(1, []int{1})
	rec.SetClock(-3*time.Microsecond, time.Microsecond)
	site := rec.Site()
	track := rec.Intern("comm 0 async")
	rec.Record(trace.Event{Kind: trace.SendEvent, Start: 10, End: 20, Peer: 0, Tag: 3, Bytes: 100, Site: site}, "", "")
	rec.Record(trace.Event{Kind: trace.RecvEvent, Flags: trace.NonBlocking, Start: 15, End: 40, Peer: 0, Tag: 4, Bytes: 200, Site: site}, "", "")
	rec.Record(trace.Event{Kind: trace.WaitEvent, Start: 30, End: 40, Peer: 0, Tag: 4, Bytes: 200, Site: site}, "recv", "")
	rec.Record(trace.Event{Kind: trace.CollectiveEvent, Flags: trace.NonBlocking, Track: track, Start: 5, End: 60, Bytes: 4096, Seq: rec.NextSeq(0), Predicted: 50, Site: site}, "allreduce", "ring")
	rec.Record(trace.Event{Kind: trace.RegionEvent, Start: 2, End: 70}, "step", "")
	rec.Record(trace.Event{Kind: trace.MemoryEvent, Start: 70, End: 70, Bytes: 1 << 20}, "", "")
	clock.set(80)
	f := closeAndRead(t, rec)
	return fileBytes(t, rec.Path()), f
}

// TestReadCut decodes the sample trace cut at every byte.
func TestReadCut(t *testing.T) {
	b, whole := sampleTrace(t)
	if len(whole.Events) != 6 {
		t.Fatalf("the sample trace has %d events", len(whole.Events))
	}
	last := 0
	for n := range len(b) {
		f, err := trace.Read(bytes.NewReader(b[:n]))
		want := trace.ErrTruncated
		switch {
		case n == 0:
			want = trace.ErrEmpty
		case n < len(trace.Magic):
			want = trace.ErrCorrupt // not even the magic
		}
		if !errors.Is(err, want) {
			t.Fatalf("cut at %d of %d bytes: %v, want an error wrapping %q", n, len(b), err, want)
		}
		if f == nil || f.Done {
			t.Fatalf("cut at %d: File %+v", n, f)
		}
		if len(f.Events) < last {
			t.Fatalf("cut at %d: %d events, fewer than the %d of a shorter cut", n, len(f.Events), last)
		}
		last = len(f.Events)
		if !slices.Equal(f.Events, whole.Events[:len(f.Events)]) {
			t.Fatalf("cut at %d: events %+v differ from the whole file's first ones", n, f.Events)
		}
		if !slices.Equal(f.Strings, whole.Strings[:len(f.Strings)]) {
			t.Fatalf("cut at %d: strings %q differ from the whole file's first ones", n, f.Strings)
		}
	}
	if last != len(whole.Events) {
		t.Errorf("the longest cut decoded %d events, want all %d", last, len(whole.Events))
	}
	if f, err := trace.Read(bytes.NewReader(b)); err != nil || !f.Done {
		t.Errorf("the whole file: %v, Done %v", err, f.Done)
	}
}

// TestReadFlipped decodes the sample trace with each byte damaged in turn:
// the decoder must not panic, must say what is wrong by wrapping one of
// its errors, and what it returns must hold together.
func TestReadFlipped(t *testing.T) {
	b, _ := sampleTrace(t)
	for i := range b {
		for _, mask := range []byte{0x01, 0x40, 0x80, 0xff} {
			d := slices.Clone(b)
			d[i] ^= mask
			f, err := trace.Read(bytes.NewReader(d))
			if err != nil && !errors.Is(err, trace.ErrCorrupt) && !errors.Is(err, trace.ErrTruncated) {
				t.Errorf("byte %d ^ %#x: %v, which wraps neither ErrCorrupt nor ErrTruncated", i, mask, err)
			}
			if err := check(f); err != nil {
				t.Errorf("byte %d ^ %#x: %v", i, mask, err)
			}
		}
	}
}

// check returns what is inconsistent in a File the decoder returned.
func check(f *trace.File) error {
	if f == nil {
		return errors.New("no File")
	}
	if len(f.Strings) == 0 || f.Strings[0] != "" {
		return fmt.Errorf("strings %q do not start with the empty one", f.Strings)
	}
	for i, e := range f.Events {
		for _, id := range []uint32{e.Name, e.Algo, e.Site, e.Track} {
			if int(id) >= len(f.Strings) {
				return fmt.Errorf("event %d names string %d of %d", i, id, len(f.Strings))
			}
		}
		if e.End < e.Start {
			return fmt.Errorf("event %d ends at %d, before its start %d", i, e.End, e.Start)
		}
		if e.Kind == 0 || e.Kind > trace.MemoryEvent {
			return fmt.Errorf("event %d is of kind %d", i, e.Kind)
		}
		if e.Bytes < 0 || e.Predicted < 0 {
			return fmt.Errorf("event %d has a negative size", i)
		}
	}
	return nil
}

func TestReadFile(t *testing.T) {
	b, whole := sampleTrace(t)
	dir := t.TempDir()
	path := filepath.Join(dir, trace.FileName(1))
	if err := os.WriteFile(path, b[:len(b)-3], 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := trace.ReadFile(path)
	if !errors.Is(err, trace.ErrTruncated) || !strings.HasPrefix(err.Error(), path+": ") {
		t.Errorf("ReadFile of a cut file = %v, want an error naming %s and wrapping ErrTruncated", err, path)
	}
	if f == nil || len(f.Events) != len(whole.Events) || f.Done {
		t.Errorf("ReadFile of a file cut in its end record: %+v, want all %d events and Done false", f, len(whole.Events))
	}
	if _, err := trace.ReadFile(filepath.Join(dir, "absent")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("ReadFile of no file = %v, want fs.ErrNotExist", err)
	}
}

// The bugs below were found writing these tests; each test shows one.

func TestReadOverlongLength(t *testing.T) {
	b := slices.Concat(file(header(2, 0, 1)), []byte{recEvent}, bytes.Repeat([]byte{0xff}, 11))
	_, err := trace.Read(bytes.NewReader(b))
	if !errors.Is(err, trace.ErrCorrupt) || !strings.Contains(err.Error(), fmt.Sprintf("byte %d", len(file(header(2, 0, 1))))) {
		t.Errorf("Read = %v, want an error wrapping ErrCorrupt and naming the record's byte", err)
	}
}

func TestReadEndOverflows(t *testing.T) {
	b := file(header(2, 0, 1), record(recEvent, []byte{byte(trace.RegionEvent), 0}, uv(0), sv(math.MaxInt64), uv(1<<62), uv(0)), end(1, 0))
	f, err := trace.Read(bytes.NewReader(b))
	if err == nil {
		if err := check(f); err != nil {
			t.Errorf("Read accepted the file, and %v", err)
		}
	}
}

func TestReadFileSizesByContent(t *testing.T) {
	path := filepath.Join(t.TempDir(), "junk")
	if err := os.WriteFile(path, []byte("not a trace"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, 64<<20); err != nil { // sparse: no disk
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := trace.ReadFile(path)
	runtime.ReadMemStats(&after)
	if !errors.Is(err, trace.ErrCorrupt) {
		t.Errorf("ReadFile = %v, want ErrCorrupt", err)
	}
	if n := after.TotalAlloc - before.TotalAlloc; n > 4<<20 {
		t.Errorf("ReadFile of a 64 MiB file that is no trace allocated %d MiB", n>>20)
	}
}
