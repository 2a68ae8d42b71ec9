package shm

import (
	"bufio"
	"context"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/gorun-hpc/gorun/spmd/transport"
	"github.com/gorun-hpc/gorun/spmd/transport/transporttest"
)

// A test binary started with childEnv set runs as one rank of a job whose
// other ranks are the parent test (rank 0) and its other children.
const (
	childEnv  = "GORUN_SHM_TEST_CHILD" // the mode: "stall" or "echo"
	jobEnv    = "GORUN_SHM_TEST_JOB"
	secretEnv = "GORUN_SHM_TEST_SECRET"
	rankEnv   = "GORUN_SHM_TEST_RANK"
	sizeEnv   = "GORUN_SHM_TEST_SIZE"
	spinEnv   = "GORUN_SHM_TEST_SPIN"
)

func TestMain(m *testing.M) {
	if mode := os.Getenv(childEnv); mode != "" {
		if err := runChild(mode); err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// runChild is the child's main: it joins the job, says "ready" on stdout,
// and then stalls (mode stall: it never reads, as a hung rank) or echoes
// every message back to its sender (mode echo) until a peer is lost.
func runChild(mode string) error {
	rank, _ := strconv.Atoi(os.Getenv(rankEnv))
	size, _ := strconv.Atoi(os.Getenv(sizeEnv))
	spin, _ := strconv.Atoi(os.Getenv(spinEnv))
	secret, _ := hex.DecodeString(os.Getenv(secretEnv))
	local := make([]int, size)
	for i := range local {
		local[i] = i
	}
	tr, err := New(os.Getenv(jobEnv), rank, local, size, secret, WithSpin(spin))
	if err != nil {
		return err
	}
	defer tr.Close()
	e := &echo{tr: tr, lost: make(chan struct{}, size), stall: mode == "stall"}
	if err := tr.Start(e); err != nil {
		return err
	}
	switch {
	case mode == "stall":
		if err := tr.Send(context.Background(), 0, transport.Header{Tag: 1, Len: 5}, []byte("hello")); err != nil {
			return err
		}
	case rank >= 2 && rank%2 == 0: // a background pair: serve the first ball
		if err := tr.Send(context.Background(), rank+1, transport.Header{Len: 8}, make([]byte, 8)); err != nil {
			return err
		}
	}
	fmt.Println("ready")
	<-e.lost
	return nil
}

// echo is the children's Handler: it sends every message straight back
// from Deliver, or with stall blocks its receiver in Buffer for ever.
type echo struct {
	tr    *Transport
	buf   [1 << 16]byte
	lost  chan struct{}
	stall bool
}

func (e *echo) Buffer(_ int, h transport.Header) []byte {
	if e.stall {
		select {}
	}
	if h.Len > len(e.buf) {
		return make([]byte, h.Len)
	}
	return e.buf[:h.Len]
}

func (e *echo) Deliver(peer int, h transport.Header, p []byte) {
	e.tr.Send(context.Background(), peer, h, p)
}

func (e *echo) Lost(int, error) { e.lost <- struct{}{} }

// startChildren starts ranks 1 to size-1 of c's job in mode and waits until
// each is ready. The test's cleanup kills what is left.
func startChildren(tb testing.TB, job string, secret []byte, mode string, size, spin int) []*exec.Cmd {
	tb.Helper()
	var cmds []*exec.Cmd
	var outs []*bufio.Reader
	for r := 1; r < size; r++ {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), childEnv+"="+mode, jobEnv+"="+job, secretEnv+"="+hex.EncodeToString(secret),
			rankEnv+"="+strconv.Itoa(r), sizeEnv+"="+strconv.Itoa(size), spinEnv+"="+strconv.Itoa(spin))
		cmd.Stderr = os.Stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			tb.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		cmds, outs = append(cmds, cmd), append(outs, bufio.NewReader(out))
	}
	for i, out := range outs { // all started first: background pairs wait for each other
		if line, err := out.ReadString('\n'); line != "ready\n" {
			tb.Fatalf("child rank %d: %q, %v", i+1, line, err)
		}
	}
	return cmds
}

// withChild starts rank 0 of a 2-rank job here, recording what it
// receives, and rank 1 as a child process in mode (runChild); the test's
// end closes rank 0 and cleans the job up.
func withChild(t *testing.T, mode string) (string, *Transport, *transporttest.Recorder, *exec.Cmd) {
	job, secret := newJobID(), newSecret()
	t.Cleanup(func() {
		if err := Cleanup(job); err != nil {
			t.Error(err)
		}
	})
	tr, err := New(job, 0, []int{0, 1}, 2, secret)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	r := transporttest.NewRecorder()
	tr.Start(r)
	return job, tr, r, startChildren(t, job, secret, mode, 2, DefaultSpin)[0]
}

func TestPeerProcessKilled(t *testing.T) {
	job, tr, r, child := withChild(t, "stall")
	if got := r.WaitMsgs(t, 1); string(got[0].Data) != "hello" {
		t.Fatalf("got %q from the child", got[0].Data)
	}
	// Both ranks are in: the child unlinks its file, unless its receiver
	// is already stuck in Buffer, as it is once our message comes.
	for deadline := time.Now().Add(waitLimit); len(jobFiles(t, job)) != 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("files left once both ranks had attached: %v", jobFiles(t, job))
		}
	}
	sent := sendAsync(context.Background(), tr, 1, 8<<20) // blocks: the child never reads
	for !sleepingOnSpace(tr, 1) {
		time.Sleep(time.Millisecond)
	}
	killed := time.Now()
	child.Process.Kill() // and not reaped: a zombie must count as dead too
	checkLost(t, r.WaitLost(t, 1), 1, errPeerDied)
	noticed := time.Since(killed)
	checkLost(t, <-sent, 1, errPeerDied)
	t.Logf("Lost(1) %v after SIGKILL", noticed)
	if noticed > 2*time.Second {
		t.Errorf("the death of rank 1 took %v to notice, want at most 2s", noticed)
	}
	child.Wait()
	if left := jobFiles(t, job); len(left) != 0 {
		t.Errorf("files left once both ranks had attached: %v", left)
	}
}

// sleepingOnSpace reports whether tr's Send to peer waits for ring space.
func sleepingOnSpace(tr *Transport, peer int) bool {
	s := tr.peers[peer].seg.Load()
	return s != nil && s.ring(tr.slot(peer, tr.rank)).c.spaceWait.Load() != 0
}

// TestIdlePeerKilled: once the receiver of an idle rank watches its peer's
// process (watchExit), it sleeps on its doorbell for idleCheck at a time,
// and the peer's SIGKILL still reaches Lost at once, through the watch.
func TestIdlePeerKilled(t *testing.T) {
	_, tr, r, child := withChild(t, "echo")
	send(t, tr, 1, 1, []byte("ping"))
	if got := r.WaitMsgs(t, 1); string(got[0].Data) != "ping" {
		t.Fatalf("got %q from the child", got[0].Data)
	}
	for deadline := time.Now().Add(waitLimit); tr.watched.Load() == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the child's process is not watched")
		}
	}
	time.Sleep(2 * checkEvery) // the receiver asleep on its doorbell, for idleCheck
	killed := time.Now()
	child.Process.Kill()
	checkLost(t, r.WaitLost(t, 1), 1, errPeerDied)
	noticed := time.Since(killed)
	t.Logf("Lost(1) %v after SIGKILL", noticed)
	if noticed > idleCheck/4 {
		t.Errorf("the death of an idle rank took %v to notice, want well under idleCheck (%v)", noticed, idleCheck)
	}
	child.Wait()
}
