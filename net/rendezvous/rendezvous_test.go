package rendezvous

import (
	"context"
	"errors"
	"fmt"
	"net"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
)

var secret = []byte("0123456789abcdef0123456789abcdef")

func serve(t *testing.T) *Server {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := Listen(ln, "job1", secret, nil)
	t.Cleanup(func() { s.Close() })
	return s
}

func record(rank int) Record {
	host := rank / 4
	return Record{Rank: rank, HostID: fmt.Sprintf("id-%d", host), Hostname: fmt.Sprintf("node%d", host),
		Addr: fmt.Sprintf("10.0.%d.%d:%d", host, rank%4, 40000+rank), Gossip: fmt.Sprintf("10.0.%d.%d:5000", host, rank%4), Pid: 1000 + rank}
}

// registerAll registers ranks of size concurrently and returns each
// one's table and error.
func registerAll(ctx context.Context, addr string, ranks []int, size int) ([][]Record, []error) {
	tables := make([][]Record, len(ranks))
	errs := make([]error, len(ranks))
	var wg sync.WaitGroup
	for i, r := range ranks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tables[i], errs[i] = Register(ctx, addr, "job1", secret, record(r), size, 0)
		}()
	}
	wg.Wait()
	return tables, errs
}

// Every rank gets the same table, in rank order, whatever the order of
// registration; the server's Wait returns it too.
func TestEveryRankGetsTheTable(t *testing.T) {
	for _, size := range []int{1, 2, 7, 512} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			s := serve(t)
			ranks := make([]int, size)
			for i := range ranks {
				ranks[i] = size - 1 - i
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			tables, errs := registerAll(ctx, s.Addr(), ranks, size)
			want := make([]Record, size)
			for i := range want {
				want[i] = record(i)
			}
			for i, err := range errs {
				if err != nil {
					t.Fatalf("rank %d: %v", ranks[i], err)
				}
				if !reflect.DeepEqual(tables[i], want) {
					t.Fatalf("rank %d's table differs:\n%v\nwant\n%v", ranks[i], tables[i], want)
				}
			}
			got, err := s.Wait(ctx)
			if err != nil || !reflect.DeepEqual(got, want) {
				t.Fatalf("Wait: %v, %v", got, err)
			}
			if m := s.Missing(); len(m) != 0 {
				t.Fatalf("Missing() = %v after all registered", m)
			}
		})
	}
}

// A rank registered late still works: the server is up before it, and a
// rank that dials before the server listens retries.
func TestDialRetries(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res := make(chan error, 1)
	go func() {
		_, err := Register(ctx, addr, "job1", secret, record(0), 1, 0)
		res <- err
	}()
	time.Sleep(100 * time.Millisecond)
	ln, err = net.Listen("tcp", addr)
	if err != nil {
		t.Skipf("the port was taken meanwhile: %v", err)
	}
	s := Listen(ln, "job1", secret, nil)
	defer s.Close()
	if err := <-res; err != nil {
		t.Fatalf("a rank that dialled before the server listened: %v", err)
	}
}

// A rank that never comes: every waiting rank's error names it, the
// same one, and matches ErrTimeout.
func TestMissingRankNamed(t *testing.T) {
	s := serve(t)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, errs := registerAll(ctx, s.Addr(), []int{0, 1, 3}, 4)
	for i, err := range errs {
		var me *MissingError
		if !errors.As(err, &me) || !errors.Is(err, ErrTimeout) {
			t.Fatalf("rank %d: %v, want a *MissingError", i, err)
		}
		if !reflect.DeepEqual(me.Missing, []int{2}) || !strings.Contains(err.Error(), "rank 2 of 4 never arrived") {
			t.Fatalf("rank %d: %v, want rank 2 named", i, err)
		}
	}
	if m := s.Missing(); !reflect.DeepEqual(m, []int{2}) {
		t.Fatalf("server's Missing() = %v, want [2]", m)
	}
}

// A wait cancelled before its deadline (the job stopped) is no timeout:
// it says how long the rank really waited, not its whole deadline (it
// said "never arrived within 1m2s" 0.1 s into a stopped job).
func TestCancelledWait(t *testing.T) {
	s := serve(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	time.AfterFunc(100*time.Millisecond, cancel)
	_, err := Register(ctx, s.Addr(), "job1", secret, record(0), 2, 0)
	var me *MissingError
	if !errors.As(err, &me) || errors.Is(err, ErrTimeout) || !errors.Is(err, context.Canceled) {
		t.Fatalf("%v, want a *MissingError wrapping context.Canceled, not ErrTimeout", err)
	}
	if me.Waited >= time.Minute || !strings.HasPrefix(err.Error(), "stopped after ") || !strings.Contains(err.Error(), "while waiting for rank 1 of 2") {
		t.Fatalf("%v (waited %v), want how long it waited and for whom", err, me.Waited)
	}
}

// Nothing listens: the error says the rendezvous did not answer.
func TestUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err = Register(ctx, addr, "job1", secret, record(0), 2, 0)
	if !errors.Is(err, ErrTimeout) || !strings.Contains(err.Error(), "did not answer") {
		t.Fatalf("%v, want a timeout saying the rendezvous did not answer", err)
	}
}

// Strangers are refused: another job, another secret, a size other than
// the first rank's, and a second process claiming a rank.
func TestRefused(t *testing.T) {
	s := serve(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	first := make(chan error, 1)
	go func() {
		_, err := Register(ctx, s.Addr(), "job1", secret, record(0), 2, 0)
		first <- err
	}()
	for len(s.Missing()) != 1 {
		time.Sleep(time.Millisecond)
	}
	cases := []struct {
		name   string
		job    string
		secret []byte
		size   int
		want   string
	}{
		{"job", "job2", secret, 2, "another job"},
		{"secret", "job1", []byte("not the secret, not at all......"), 2, "another job, or not the job's secret"},
		{"size", "job1", secret, 3, "of a job of 3 ranks, but the ranks before it said 2"},
	}
	for _, tc := range cases {
		_, err := Register(ctx, s.Addr(), tc.job, tc.secret, record(1), tc.size, 0)
		if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want a refusal saying %q", tc.name, err, tc.want)
		}
	}
	dup := record(0)
	dup.Pid = 4242
	_, err := Register(ctx, s.Addr(), "job1", secret, dup, 2, 0)
	if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "rank 0 registered twice") || !strings.Contains(err.Error(), "4242") {
		t.Errorf("a second rank 0: %v, want a refusal naming both", err)
	}
	if _, err := Register(ctx, s.Addr(), "job1", secret, record(1), 2, 0); err != nil {
		t.Fatalf("rank 1: %v", err)
	}
	if err := <-first; err != nil {
		t.Fatalf("the genuine rank 0: %v", err)
	}
}

// Close does not wait for connections that are stuck: a peer that sends
// nothing, and a rank waiting for others.
func TestCloseReturns(t *testing.T) {
	s := serve(t)
	c, err := net.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	res := make(chan error, 1)
	go func() {
		_, err := Register(context.Background(), s.Addr(), "job1", secret, record(0), 3, 0)
		res <- err
	}()
	for len(s.Missing()) != 2 {
		time.Sleep(time.Millisecond)
	}
	t0 := time.Now()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(t0); d > 5*time.Second {
		t.Errorf("Close took %v", d)
	}
	if err := <-res; err == nil {
		t.Fatal("a rank waiting on a closed server got no error")
	}
	if _, err := s.Wait(context.Background()); !errors.Is(err, ErrClosed) {
		t.Fatal("Wait on a server that never filled returned no error")
	}
}

// The table's decoder never panics and refuses what its encoder did not
// write.
func FuzzDecodeTable(f *testing.F) {
	recs := []Record{record(0), record(1), record(2), record(5)}
	for i := range recs {
		recs[i].Rank = i
	}
	f.Add(encodeTable(recs), 4)
	f.Add(encodeTable(recs[:1]), 1)
	f.Add([]byte{}, 2)
	f.Fuzz(func(t *testing.T, b []byte, size int) {
		if size < 1 || size > 64 {
			return
		}
		got, err := decodeTable(b, size)
		if err == nil {
			if len(got) != size {
				t.Fatalf("%d records for size %d", len(got), size)
			}
			if again := encodeTable(got); string(again) != string(b) {
				// Two encodings of one table differ only if the input
				// repeated a host; the decoded table must still encode to
				// something that decodes to itself.
				back, err := decodeTable(again, size)
				if err != nil || !reflect.DeepEqual(back, got) {
					t.Fatalf("re-encoding a decoded table: %v", err)
				}
			}
		}
		decodeRanks(b, size)
	})
}

// The launcher hears of a missing rank before the ranks give up: Watch
// returns it once the first rank's wait (its deadline less its grace) is
// over, and the ranks fail only at their deadline.
func TestWatchBeforeRanks(t *testing.T) {
	s := serve(t)
	ctx, cancel := context.WithTimeout(context.Background(), 800*time.Millisecond)
	defer cancel()
	res := make(chan error, 2)
	for _, r := range []int{0, 1} {
		go func() {
			_, err := Register(ctx, s.Addr(), "job1", secret, record(r), 3, 600*time.Millisecond)
			res <- err
		}()
	}
	t0 := time.Now()
	missing, err := s.Watch(context.Background())
	if err != nil || !reflect.DeepEqual(missing, []int{2}) {
		t.Fatalf("Watch: %v, %v; want [2]", missing, err)
	}
	select {
	case err := <-res:
		t.Fatalf("a rank gave up (%v) before Watch's answer was acted on, %v after it", err, time.Since(t0))
	default:
	}
	for range 2 {
		if err := <-res; !errors.Is(err, ErrTimeout) {
			t.Fatalf("a rank: %v, want a timeout", err)
		}
	}
	// A full job: Watch returns nothing missing.
	s2 := serve(t)
	go Register(context.Background(), s2.Addr(), "job1", secret, record(0), 1, 0)
	if missing, err := s2.Watch(context.Background()); err != nil || missing != nil {
		t.Fatalf("Watch on a full job: %v, %v", missing, err)
	}
}
