package launch

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
)

func TestFrameRoundTrip(t *testing.T) {
	frames := []frame{
		jsonFrame(frameHello, 0, 0, helloMsg{Hostname: "h1", Pid: 42, SSH: "198.18.0.1 5000 198.18.0.2 22"}),
		jsonFrame(frameSetup, 3, 0, setupMsg{Name: "h3", Secret: []byte{1, 2, 3}, Subtree: []target{{Index: 4, Name: "h4", Dest: "root@h4"}}}),
		jsonFrame(frameStart, 3, 7, startMsg{Path: "/bin/prog", Args: []string{"-x"}, Env: []string{"GORUN_RANK=7"}, Stdin: true}),
		u32Frame(frameSignal, 3, 7, 15),
		u32Frame(frameStarted, 3, 7, 12345),
		{Type: frameOutput, Host: 3, Rank: 7, Payload: append([]byte{1}, "line\n"...)},
		{Type: frameStdin, Host: 3, Rank: 7},
		jsonFrame(frameExited, 3, 7, exitMsg{Signal: 9}),
		{Type: frameLost, Host: 4, Payload: []byte("ssh exited 255")},
		u32Frame(framePing, 4, 0, 1),
		u32Frame(framePong, 4, 0, 1),
	}
	var b []byte
	for _, f := range frames {
		b = appendFrame(b, f)
	}
	r := bufio.NewReader(bytes.NewReader(b))
	for i, want := range frames {
		got, err := readFrame(r)
		if err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		if want.Payload == nil {
			want.Payload = []byte{}
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("frame %d = %+v, want %+v", i, got, want)
		}
	}
	if _, err := readFrame(r); err != io.EOF {
		t.Errorf("after the last frame: %v, want io.EOF", err)
	}
	var s setupMsg
	if err := frames[1].decode(&s); err != nil || s.Name != "h3" || string(s.Secret) != "\x01\x02\x03" {
		t.Errorf("setup decodes to %+v, %v", s, err)
	}
}

func TestReadFrameErrors(t *testing.T) {
	good := appendFrame(nil, u32Frame(frameSignal, 1, 2, 15))
	for _, tc := range []struct {
		name string
		b    []byte
	}{
		{"short length", []byte{0, 0, 0, 3, 1, 0, 0}},
		{"too long", []byte{0xff, 0, 0, 0, 1}},
		{"bad type", appendFrame(nil, frame{Type: 0, Host: 1})},
		{"type past the last", appendFrame(nil, frame{Type: frameLast + 1, Host: 1})},
		{"truncated payload", good[:len(good)-1]},
		{"truncated header", good[:7]},
		{"huge host", appendFrame(nil, frame{Type: frameLog, Host: 1 << 30})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := readFrame(bufio.NewReader(bytes.NewReader(tc.b)))
			if !errors.Is(err, errFrame) {
				t.Errorf("readFrame = %v, want ErrFrame", err)
			}
		})
	}
}

func TestSkipPreamble(t *testing.T) {
	frame := appendFrame(nil, frame{Type: frameLog, Host: 1, Payload: []byte("x")})
	for _, junk := range []string{"", "pyenv: no such command\n", "no newline", strings.Repeat("x", 70000) + "\n\r\n"} {
		in := append([]byte(junk+"\n"+preamble+"\n"), frame...)
		r := bufio.NewReaderSize(bytes.NewReader(in), 4096)
		got, err := skipPreamble(r)
		if err != nil || string(got) != junk+"\n" {
			t.Errorf("junk %.20q: skipPreamble = %.20q, %v", junk, got, err)
			continue
		}
		if f, err := readFrame(r); err != nil || string(f.Payload) != "x" {
			t.Errorf("junk %.20q: frame after the preamble = %+v, %v", junk, f, err)
		}
	}
	if _, err := skipPreamble(bufio.NewReader(strings.NewReader("bash: gorun: command not found\n"))); err != io.EOF {
		t.Errorf("no preamble: err = %v, want io.EOF", err)
	}
	var pe *protocolError
	if _, err := skipPreamble(bufio.NewReader(strings.NewReader("motd\nGORUN-AGENT 1\n"))); !errors.As(err, &pe) || pe.version != "1" {
		t.Errorf("an agent of protocol 1: err = %v, want a protocolError", err)
	}
}

// FuzzAgentFrame feeds arbitrary bytes to the decoders of what agents and
// the launcher read: the preamble scan, frames, and their payloads. They
// must never panic, and a decoded frame must encode back to its bytes.
func FuzzAgentFrame(f *testing.F) {
	f.Add(appendFrame(nil, u32Frame(frameStarted, 1, 2, 99)))
	f.Add(appendFrame(nil, jsonFrame(frameSetup, 1, 0, setupMsg{Name: "h1", Radix: 2})))
	f.Add(append([]byte("junk\n"+preamble+"\n"), appendFrame(nil, jsonFrame(frameExited, 1, 0, exitMsg{Code: 3}))...))
	f.Add([]byte{0, 0, 0, 9, 5, 0, 0, 0, 1, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		r := bufio.NewReader(bytes.NewReader(b))
		if bytes.Contains(b, []byte(preamble)) {
			skipPreamble(r)
		}
		for {
			fr, err := readFrame(r)
			if err != nil {
				return
			}
			if got := appendFrame(nil, fr); len(got) != 4+frameHeader+len(fr.Payload) {
				t.Fatalf("re-encoded frame has %d bytes", len(got))
			}
			var (
				s  setupMsg
				st startMsg
				h  helloMsg
				e  exitMsg
			)
			for _, v := range []any{&s, &st, &h, &e} {
				fr.decode(v)
			}
			fr.u32()
		}
	})
}
