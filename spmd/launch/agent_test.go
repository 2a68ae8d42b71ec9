package launch

import (
	"bufio"
	"context"
	"encoding/hex"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// agentPeer is the launcher's end of an in-process agent.
type agentPeer struct {
	t    *testing.T
	w    *io.PipeWriter
	r    *bufio.Reader
	done chan int
	// held keeps the output frames that next passed over: a rank's first
	// output may come before the frame that says it started.
	held []frame
}

// frame returns the next frame, held ones first.
func (p *agentPeer) frame() (frame, error) {
	if len(p.held) > 0 {
		f := p.held[0]
		p.held = p.held[1:]
		return f, nil
	}
	return readFrame(p.r)
}

func startAgent(t *testing.T) *agentPeer {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	p := &agentPeer{t: t, w: inW, r: bufio.NewReader(outR), done: make(chan int, 1)}
	go func() {
		p.done <- RunAgent(context.Background(), inR, outW, io.Discard, nil)
		outW.Close()
	}()
	t.Cleanup(func() { inW.Close(); io.Copy(io.Discard, outR) })
	if junk, err := skipPreamble(p.r); err != nil || string(junk) != "\n" {
		t.Fatalf("preamble: junk %q, %v", junk, err)
	}
	return p
}

func (p *agentPeer) send(f frame) {
	if _, err := p.w.Write(appendFrame(nil, f)); err != nil {
		p.t.Fatal(err)
	}
}

// next reads frames until one of type typ, skipping logs.
func (p *agentPeer) next(typ byte) frame {
	p.t.Helper()
	for {
		f, err := readFrame(p.r)
		if err != nil {
			p.t.Fatalf("waiting for a frame of type %d: %v", typ, err)
		}
		if f.Type == typ {
			return f
		}
		if f.Type == frameLog {
			p.t.Logf("agent log: %s", f.Payload)
			continue
		}
		if f.Type == frameAlive {
			continue
		}
		if typ != frameOutput && f.Type == frameOutput {
			p.held = append(p.held, f)
			continue
		}
		p.t.Fatalf("got frame %+v, want type %d", f, typ)
	}
}

func TestAgentProtocol(t *testing.T) {
	p := startAgent(t)
	var hello helloMsg
	if err := p.next(frameHello).decode(&hello); err != nil || hello.Pid == 0 {
		t.Fatalf("hello = %+v, %v", hello, err)
	}
	secret := []byte("0123456789abcdef0123456789abcdef")
	p.send(jsonFrame(frameSetup, 1, 0, setupMsg{Name: "h1", Secret: secret, Seed: "127.0.0.1", KillGrace: time.Second}))
	var ready readyMsg
	if f := p.next(frameReady); f.decode(&ready) != nil || f.Host != 1 || ready.BindAddr != "127.0.0.1" {
		t.Fatalf("ready = %+v from %d", ready, f.Host)
	}

	// A rank with stdin, output on both streams, the secret, and a status.
	script := `echo "out $GORUN_RANK $GORUN_BIND_ADDR"; echo err >&2; read x; echo "got $x"; echo "secret $(head -c 64 <&3)"; exit 3`
	p.send(jsonFrame(frameStart, 1, 5, startMsg{Path: "/bin/sh", Args: []string{"-c", script}, Env: []string{"GORUN_RANK=5"}, Stdin: true}))
	if pid, err := p.next(frameStarted).u32(); err != nil || pid == 0 {
		t.Fatalf("started: pid %d, %v", pid, err)
	}
	p.send(frame{Type: frameStdin, Host: 1, Rank: 5, Payload: []byte("hello\n")})
	p.send(frame{Type: frameStdin, Host: 1, Rank: 5})
	var out, errOut strings.Builder
	acked := 0
	for {
		f, err := p.frame()
		if err != nil {
			t.Fatal(err)
		}
		if f.Type == frameStdinAck && f.Rank == 5 {
			n, err := f.u32()
			if err != nil {
				t.Fatalf("stdin ack %+v: %v", f, err)
			}
			acked += n
			continue
		}
		if f.Type == frameOutput && f.Rank == 5 {
			map[byte]*strings.Builder{1: &out, 2: &errOut}[f.Payload[0]].Write(f.Payload[1:])
			continue
		}
		if f.Type != frameExited {
			t.Fatalf("unexpected frame %+v", f)
		}
		var e exitMsg
		if f.decode(&e); e.Code != 3 || f.Rank != 5 {
			t.Errorf("exited %+v for rank %d, want code 3 for rank 5", e, f.Rank)
		}
		break
	}
	if acked != len("hello\n") {
		t.Errorf("%d bytes of stdin acknowledged, want %d", acked, len("hello\n"))
	}
	want := "out 5 127.0.0.1\ngot hello\nsecret " + hex.EncodeToString(secret) + "\n"
	if out.String() != want || errOut.String() != "err\n" {
		t.Errorf("stdout %q, stderr %q; want %q, %q", out.String(), errOut.String(), want, "err\n")
	}

	// A signal frame reaches the rank.
	p.send(jsonFrame(frameStart, 1, 6, startMsg{Path: "/bin/sleep", Args: []string{"300"}}))
	p.next(frameStarted)
	p.send(u32Frame(frameSignal, 1, 6, int(syscall.SIGTERM)))
	var e exitMsg
	if f := p.next(frameExited); f.decode(&e) != nil || e.Signal != int(syscall.SIGTERM) {
		t.Errorf("signalled rank exited %+v", e)
	}

	// A ping is answered with its number.
	p.send(u32Frame(framePing, 1, 0, 7))
	if f := p.next(framePong); f.Host != 1 {
		t.Errorf("pong from host %d, want 1", f.Host)
	} else if n, err := f.u32(); err != nil || n != 7 {
		t.Errorf("pong of ping %d, %v; want 7", n, err)
	}

	// A program that is not there: exited 127, with the reason.
	p.send(jsonFrame(frameStart, 1, 7, startMsg{Path: "/nonexistent/prog"}))
	if f := p.next(frameExited); f.decode(&e) != nil || e.Code != 127 || !strings.Contains(e.StartErr, "/nonexistent/prog") {
		t.Errorf("missing program exited %+v, want 127 and why", e)
	}

	// A --wdir the host lacks is a start failure (2); the launcher's own
	// directory, which the host may lack, is not.
	e = exitMsg{}
	p.send(jsonFrame(frameStart, 1, 9, startMsg{Path: "/bin/true", Dir: "/nonexistent/dir", DirSet: true}))
	if f := p.next(frameExited); f.decode(&e) != nil || e.Code != 2 || !strings.Contains(e.StartErr, "--wdir /nonexistent/dir: no such file or directory on this host") {
		t.Errorf("rank with a missing --wdir exited %+v, want 2 and why", e)
	}
	e = exitMsg{}
	p.send(jsonFrame(frameStart, 1, 10, startMsg{Path: "/bin/true", Dir: "/nonexistent/dir"}))
	p.next(frameStarted)
	if f := p.next(frameExited); f.decode(&e) != nil || e.Code != 0 || e.StartErr != "" {
		t.Errorf("rank in a missing launcher's directory exited %+v, want 0", e)
	}

	// The launcher's connection drops: the agent kills its ranks and returns.
	p.send(jsonFrame(frameStart, 1, 8, startMsg{Path: "/bin/sleep", Args: []string{"300"}}))
	pid, _ := p.next(frameStarted).u32()
	p.w.Close()
	go io.Copy(io.Discard, p.r)
	select {
	case <-p.done:
	case <-time.After(20 * time.Second):
		t.Fatal("agent did not return after its input ended")
	}
	if err := syscall.Kill(pid, 0); err == nil {
		t.Errorf("rank pid %d survived its agent", pid)
	}
}

// TestAgentMalformedFrame: bytes that are not a frame make the agent stop
// its ranks and exit 1, saying why.
func TestAgentMalformedFrame(t *testing.T) {
	var log strings.Builder
	in := strings.NewReader("this is not an agent frame\n")
	code := RunAgent(context.Background(), in, io.Discard, &log, nil)
	if code != 1 || !strings.Contains(log.String(), "malformed agent frame") {
		t.Errorf("RunAgent = %d, log %q; want 1 and the reason", code, log.String())
	}
}

// TestAgentStdinNeverBlocks: a rank that does not read its stdin holds up
// its own input only. Before, the agent wrote stdin frames on the
// goroutine that reads every frame: with more than a pipe's worth queued
// for a rank that did not read, the frames after it (the signal to stop
// it, the start of a rank that it waited for) waited forever.
func TestAgentStdinNeverBlocks(t *testing.T) {
	p := startAgent(t)
	p.next(frameHello)
	p.send(jsonFrame(frameSetup, 1, 0, setupMsg{Name: "h1", Seed: "127.0.0.1", KillGrace: time.Second}))
	p.next(frameReady)
	p.send(jsonFrame(frameStart, 1, 0, startMsg{Path: "/bin/sleep", Args: []string{"60"}, Stdin: true}))
	p.next(frameStarted)
	go func() { // not on the test's goroutine: the agent's reading may block
		chunk := make([]byte, outputChunk)
		for range 16 { // 512 KiB: 8 pipes' worth
			p.w.Write(appendFrame(nil, frame{Type: frameStdin, Host: 1, Rank: 0, Payload: chunk}))
		}
		p.w.Write(appendFrame(nil, jsonFrame(frameStart, 1, 1, startMsg{Path: "/bin/sh", Args: []string{"-c", "echo second"}})))
	}()
	got := make(chan error, 1)
	go func() {
		for {
			f, err := p.frame()
			switch {
			case err != nil:
				got <- err
				return
			case f.Type == frameOutput && f.Rank == 1:
				got <- nil
				return
			}
		}
	}()
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the second rank did not start while the first held 512 KiB of stdin unread")
	}
}

// TestAgentPreloaded: an agent runs each rank's program from its own copy
// in the preload directory that its setup names, programs of one base
// name apart (it ran dir/BASE for both), and removes the directory at its
// end.
func TestAgentPreloaded(t *testing.T) {
	dir := filepath.Join(t.TempDir(), preloadPrefix+"test")
	for _, p := range []struct{ name, says string }{{"1/prog", "one"}, {"2/prog", "two"}} {
		os.MkdirAll(filepath.Join(dir, filepath.Dir(p.name)), 0o700)
		if err := os.WriteFile(filepath.Join(dir, p.name), []byte("#!/bin/sh\necho "+p.says+"\n"), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	p := startAgent(t)
	p.next(frameHello)
	p.send(jsonFrame(frameSetup, 1, 0, setupMsg{Name: "h1", Seed: "127.0.0.1", KillGrace: time.Second, PreloadDir: dir}))
	p.next(frameReady)
	for rank, name := range []string{"1/prog", "2/prog"} {
		p.send(jsonFrame(frameStart, 1, rank, startMsg{Path: "/elsewhere/" + name, Preloaded: name}))
		var out []byte
		for {
			f, err := p.frame()
			if err != nil {
				t.Fatal(err)
			}
			if f.Type == frameOutput {
				out = append(out, f.Payload[1:]...)
			}
			if f.Type == frameExited {
				break
			}
		}
		if want := []string{"one\n", "two\n"}[rank]; string(out) != want {
			t.Errorf("rank %d (%s) said %q, want %q", rank, name, out, want)
		}
	}
	p.w.Close()
	go io.Copy(io.Discard, p.r)
	<-p.done
	if _, err := os.Stat(dir); err == nil {
		t.Errorf("the agent left its preload directory %s", dir)
	}
}

// TestPreloadFiles: what a preloaded agent copies on to its children is
// every file of its directory, under the names the launcher gave them.
func TestPreloadFiles(t *testing.T) {
	files, names := preloadPrograms([]string{"/a/prog", "/b/prog", "/a/prog", ""})
	if len(files) != 2 || names["/a/prog"] != "1/prog" || names["/b/prog"] != "2/prog" {
		t.Fatalf("preloadPrograms = %v, %v", files, names)
	}
	dir := t.TempDir()
	for _, name := range []string{"gorun", "1/prog", "2/prog"} {
		os.MkdirAll(filepath.Join(dir, filepath.Dir(name)), 0o700)
		os.WriteFile(filepath.Join(dir, name), []byte(name), 0o700)
	}
	var got []string
	for _, f := range preloadFiles(dir) {
		got = append(got, f.Name)
		if b, err := os.ReadFile(f.Path); err != nil || string(b) != f.Name {
			t.Errorf("%s is %s, holding %q, %v", f.Name, f.Path, b, err)
		}
	}
	if strings.Join(got, " ") != "1/prog 2/prog gorun" {
		t.Errorf("preloadFiles = %v", got)
	}
}

// TestAgentRefusesAddress: an --iface or --net that matches no address
// of the agent's host is refused in its ready, naming the flag and the
// host's addresses; the ranks listened on 127.0.0.1, where the ranks of
// other hosts waited for them until their init timeout.
func TestAgentRefusesAddress(t *testing.T) {
	for _, tc := range []struct {
		iface, cidr, seed, want string
	}{
		{"", "203.0.113.0/24", "127.0.0.1", "--net 203.0.113.0/24: no local address in it (have "},
		{"nosuch0", "", "127.0.0.1", "--iface nosuch0: no interface nosuch0; this host has "},
		// Loopback, where the launcher is not: its ranks would reach no other host.
		{"lo", "", "198.18.0.1", "--iface lo: 127.0.0.1 is a loopback address, which no other host reaches (have "},
	} {
		p := startAgent(t)
		p.next(frameHello)
		p.send(jsonFrame(frameSetup, 1, 0, setupMsg{Name: "h1", Seed: tc.seed, Iface: tc.iface, Net: tc.cidr}))
		var ready readyMsg
		if err := p.next(frameReady).decode(&ready); err != nil || !strings.Contains(ready.Refused, tc.want) || !strings.Contains(ready.Refused, "127.0.0.1/8") || ready.BindAddr != "" {
			t.Errorf("--iface %q --net %q: ready %+v, %v; want it refused with %q", tc.iface, tc.cidr, ready, err, tc.want)
		}
	}
}
