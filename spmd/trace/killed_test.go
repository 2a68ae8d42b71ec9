package trace_test

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/gorun-hpc/gorun/spmd/trace"
)

// killedEnv names the directory the child of TestKilledRankKeepsItsEvents
// records in.
const killedEnv = "GORUN_TRACE_TEST_KILLED"

// killedEvents is how many events the child records before it says so:
// far fewer bytes than the recorder's buffer holds.
const killedEvents = 1000

// TestKilledRankKeepsItsEvents runs a process that records events, then
// SIGKILLs it some flush intervals later, as gorun kills a rank: its trace
// must read, cut short, with every event it recorded before then.
func TestKilledRankKeepsItsEvents(t *testing.T) {
	if dir := os.Getenv(killedEnv); dir != "" {
		recordUntilKilled(dir)
		return
	}
	if testing.Short() {
		t.Skip("runs a process")
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestKilledRankKeepsItsEvents$")
	cmd.Env = append(os.Environ(), killedEnv+"="+dir)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || line != "recorded\n" {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("the child said %q, %v; want recorded", line, err)
	}
	time.Sleep(10 * trace.FlushEvery)
	cmd.Process.Kill()
	cmd.Wait()

	f, err := trace.ReadFile(dir + "/" + trace.FileName(0))
	if !errors.Is(err, trace.ErrTruncated) || f == nil || f.Done {
		t.Fatalf("ReadFile of a killed rank's trace: %v; want it cut short (ErrTruncated)", err)
	}
	if f.Offset != 5 || f.RTT != 7 {
		t.Errorf("clock offset %d, round trip %d; want the 5 and 7 recorded", f.Offset, f.RTT)
	}
	var before, after int
	for _, e := range f.Events {
		switch f.Str(e.Name) {
		case "before":
			before++
		case "after":
			after++
		}
	}
	if before != killedEvents || after == 0 {
		t.Errorf("the trace holds %d of the %d events recorded before the child said so, and %d of those recorded after; want all, and some (%v)", before, killedEvents, after, err)
	}
}

// recordUntilKilled is the child: it records killedEvents regions, says
// so, then records one a millisecond until it is killed.
func recordUntilKilled(dir string) {
	rec, err := trace.New(dir, trace.Header{Rank: 0, Size: 1})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	rec.SetClock(5, 7)
	region := func(name string) {
		start := rec.Now()
		rec.Record(trace.Event{Kind: trace.RegionEvent, Start: start}, name, "")
	}
	for range killedEvents {
		region("before")
	}
	fmt.Println("recorded")
	for {
		region("after")
		time.Sleep(time.Millisecond)
	}
}
