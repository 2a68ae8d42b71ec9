package tcp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorun-hpc/gorun/spmd/transport"
	"github.com/gorun-hpc/gorun/spmd/transport/transporttest"
)

// waitLog waits until the log holds want.
func waitLog(t *testing.T, lb *logBuffer, want string) {
	t.Helper()
	for start := time.Now(); !strings.Contains(lb.String(), want); time.Sleep(time.Millisecond) {
		if time.Since(start) > waitLimit {
			t.Fatalf("log never mentioned %q; log:\n%s", want, lb)
		}
	}
}

func TestStrangersAreRefused(t *testing.T) {
	wrongRank := make([]byte, helloSize)
	(&hello{from: 1, to: 5}).put(wrongRank)
	for _, c := range []struct {
		name  string
		bytes []byte
	}{
		{"http request", []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n" + strings.Repeat("x", 64))},
		{"frame without handshake", func() []byte {
			b := make([]byte, headerSize+4)
			putHeader(b, transport.Header{Len: 4})
			return b
		}()},
		{"hello to a rank that is not there", wrongRank},
		{"hello then a forged proof", func() []byte {
			b := make([]byte, helloSize+macSize)
			(&hello{from: 1, to: 0}).put(b)
			return b
		}()},
	} {
		t.Run(c.name, func(t *testing.T) {
			var lb logBuffer
			ts, rs := newCluster(t, 2, WithLogger(lb.logger()))
			conn, err := net.Dial("tcp", ts[0].ln.Addr())
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			conn.Write(c.bytes)
			conn.SetReadDeadline(time.Now().Add(waitLimit))
			if _, err := io.ReadAll(conn); err != nil && !errors.Is(err, net.ErrClosed) && !isReset(err) {
				t.Fatalf("the stranger's connection was not closed: %v", err)
			}
			waitLog(t, &lb, "refused connection from "+conn.LocalAddr().String())
			send(t, ts[1], 0, 0, []byte("still serving"))
			if got := rs[0].WaitMsgs(t, 1); len(got) != 1 || got[0].Peer != 1 {
				t.Fatalf("handler saw %v, want only rank 1's message", got)
			}
		})
	}
}

// isReset reports a connection reset, which a refused stranger may see
// instead of end of stream.
func isReset(err error) bool {
	return strings.Contains(err.Error(), "connection reset")
}

func TestWrongSecretIsRefused(t *testing.T) {
	var lb logBuffer
	ts, rs := newCluster(t, 2, WithLogger(lb.logger()))
	// An impostor that claims rank 1 of the same job, at rank 1's address
	// book, with another secret.
	l, err := Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addrs := []string{ts[0].ln.Addr(), l.Addr()}
	var ilb logBuffer
	imp := New(l, 1, addrs, []byte("not the job secret"), WithLogger(ilb.logger()), WithDialTimeout(time.Second))
	ir := transporttest.NewRecorder()
	if err := imp.Start(ir); err != nil {
		t.Fatal(err)
	}
	defer imp.Close()

	err = imp.Send(context.Background(), 0, transport.Header{Len: 3}, []byte("bad"))
	if !errors.Is(err, errAuth) {
		t.Errorf("impostor's send: %v, want an authentication failure", err)
	}
	checkLostRank(t, err, 0, addrs[0])
	waitLog(t, &lb, "refused connection from 127.0.0.1:")

	// Rank 0 dialing the impostor's address also refuses to talk.
	good := New(mustListen(t), 0, addrs, testSecret, WithDialTimeout(time.Second))
	rr := transporttest.NewRecorder()
	if err := good.Start(rr); err != nil {
		t.Fatal(err)
	}
	defer good.Close()
	if err := good.Send(context.Background(), 1, transport.Header{}, nil); !errors.Is(err, errAuth) {
		t.Errorf("send to the impostor: %v, want an authentication failure", err)
	}
	waitLog(t, &ilb, "refused connection from 127.0.0.1:")
	if rs[0].Count()+ir.Count()+rr.Count() != 0 {
		t.Error("a handler saw a message over an unauthenticated connection")
	}
}

func mustListen(t *testing.T) *Listener {
	t.Helper()
	l, err := Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestSimultaneousDial(t *testing.T) {
	const rounds, perSide = 40, 20
	rejected := 0
	for round := range rounds {
		t.Run(fmt.Sprint(round), func(t *testing.T) {
			var lb logBuffer
			ts, rs := newCluster(t, 2, WithLogger(lb.logger()))
			var wg sync.WaitGroup
			gate := make(chan struct{})
			for me := range 2 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-gate
					for seq := range perSide {
						send(t, ts[me], 1-me, 4, seqPayload(me, 4, seq, 16))
					}
				}()
			}
			close(gate)
			wg.Wait()
			for me := range 2 {
				for seq, m := range rs[me].WaitMsgs(t, perSide) {
					checkSeqPayload(t, m, 4, seq)
				}
			}
			a, b := ts[0].peers[1].conn.Load(), ts[1].peers[0].conn.Load()
			if a.LocalAddr().String() != b.RemoteAddr().String() || a.RemoteAddr().String() != b.LocalAddr().String() {
				t.Errorf("ranks use different connections: %v-%v and %v-%v",
					a.LocalAddr(), a.RemoteAddr(), b.LocalAddr(), b.RemoteAddr())
			}
			if strings.Contains(lb.String(), "rejected a second connection") {
				rejected++
			}
		})
	}
	t.Logf("%d of %d rounds had both dials in flight", rejected, rounds)
}

func TestSilentStrangerHoldsUpNobody(t *testing.T) {
	ts, rs := newCluster(t, 2)
	conn, err := net.Dial("tcp", ts[0].ln.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.Write([]byte{'g', 'r'}) // a start, then silence until Close
	send(t, ts[1], 0, 0, []byte("served anyway"))
	rs[0].WaitMsgs(t, 1)
	ts[0].Close() // must not wait for the handshake timeout
	conn.SetReadDeadline(time.Now().Add(waitLimit))
	if _, err := io.ReadAll(conn); err != nil && !isReset(err) {
		t.Fatalf("the stranger's connection outlived Close: %v", err)
	}
}
