package launch

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
)

func TestShebang(t *testing.T) {
	for _, tc := range []struct{ line, interp, arg string }{
		{"/bin/sh\n", "/bin/sh", ""},
		{" \t/bin/sh \t\nrest", "/bin/sh", ""},
		{"/usr/bin/env python3 -u\n", "/usr/bin/env", "python3 -u"},
		{"/bin/sh\t-e\t\n", "/bin/sh", "-e"},
		// Windows line endings: the \r is part of the last word.
		{"/bin/sh\r\n", "/bin/sh\r", ""},
		{"/usr/bin/env python3\r\n", "/usr/bin/env", "python3\r"},
		{"/bin/sh\x00junk\n", "/bin/sh", ""},
		{"  \n", "", ""},
		{"/bin/sh", "/bin/sh", ""}, // no newline in the kernel's buffer
	} {
		interp, arg := shebang([]byte(tc.line))
		if interp != tc.interp || arg != tc.arg {
			t.Errorf("shebang(%q) = %q, %q; want %q, %q", tc.line, interp, arg, tc.interp, tc.arg)
		}
	}
}

// TestRunnable: what the kernel would refuse at exec is said before any
// rank starts, with the status gorun(1) gives it.
func TestRunnable(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name    string
		content string
		kind    error  // nil: runnable
		want    string // in the message
	}{
		{"script", "#!/bin/sh\necho hi\n", nil, ""},
		{"env script", "#!/usr/bin/env sh\necho hi\n", nil, ""},
		{"relative interpreter", "#!interp\n", nil, ""},
		{"missing interpreter", "#!/no/such/interp -x\necho hi\n", errNotFound, "its #! line names /no/such/interp, which does not exist: install it or fix the line"},
		// Said "start ...: no such file or directory" of the script
		// itself: strings.Fields had dropped the \r and found /bin/sh.
		{"crlf", "#!/bin/sh\r\necho hi\r\n", errNotFound, `its #! line names "/bin/sh\r", which does not exist: the file has Windows (CRLF) line endings`},
		{"crlf env", "#!/usr/bin/env sh\r\necho hi\r\n", errNotFound, `its #! line runs /usr/bin/env "sh\r", which is not on PATH: the file has Windows (CRLF) line endings`},
		{"no interpreter", "#! \t\necho hi\n", ErrNotExecutable, "its #! line names no interpreter"},
		{"no #!", "echo hi\n", ErrNotExecutable, "is not a program this machine can run (no #! line, not an ELF for this machine)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-"))
			if err := os.WriteFile(path, []byte(tc.content), 0o755); err != nil {
				t.Fatal(err)
			}
			err := runnable(path, path)
			switch {
			case tc.kind == nil && err != nil:
				t.Fatalf("runnable: %v", err)
			case tc.kind == nil:
				return
			case !errors.Is(err, tc.kind):
				t.Fatalf("runnable: %v; want an error of kind %v", err, tc.kind)
			case !strings.Contains(err.Error(), tc.want):
				t.Errorf("runnable: %v\nwant it to say %q", err, tc.want)
			}
			if tc.name == "crlf" {
				if want := "convert them with sed -i 's/\\r$//' " + path + " (or dos2unix " + path + ")"; !strings.HasSuffix(err.Error(), want) {
					t.Errorf("runnable: %v\nwant it to end %q", err, want)
				}
			}
		})
	}
}

// patchedELF writes a copy of this test's own executable (an ELF of this
// machine) to dir/name with its header changed by patch.
func patchedELF(t *testing.T, dir, name string, patch func(h *elf.Header64)) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	if elf.Class(b[elf.EI_CLASS]) != elf.ELFCLASS64 || elf.Data(b[elf.EI_DATA]) != elf.ELFDATA2LSB {
		t.Skip("the test's executable is not a little-endian 64-bit ELF")
	}
	var h elf.Header64
	if err := binary.Read(bytes.NewReader(b), binary.LittleEndian, &h); err != nil {
		t.Fatal(err)
	}
	patch(&h)
	var w bytes.Buffer
	binary.Write(&w, binary.LittleEndian, &h)
	copy(b, w.Bytes())
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, b, 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestRunnableELF: an ELF that the kernel's loader would refuse is said
// before any rank starts (status 126); one it runs passes, whatever
// debug/elf makes of its sections. A header cut short passed, and exec's
// "exec format error" was status 1.
func TestRunnableELF(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("ELF checks are Linux's")
	}
	dir := t.TempDir()
	short := filepath.Join(dir, "short")
	os.WriteFile(short, []byte("\x7fELF\x02\x01\x01\x00garbage"), 0o755)
	other := elf.EM_AARCH64
	if runtime.GOARCH == "arm64" {
		other = elf.EM_X86_64
	}
	for _, tc := range []struct {
		name, path, want string // want "": runnable
	}{
		{"short", short, "an ELF file of 15 bytes, cut short in its header: a truncated or damaged file"},
		{"object", patchedELF(t, dir, "object", func(h *elf.Header64) { h.Type = uint16(elf.ET_REL) }), "an ELF relocatable object (a .o file), not an executable: link it"},
		{"core", patchedELF(t, dir, "core", func(h *elf.Header64) { h.Type = uint16(elf.ET_CORE) }), "an ELF core dump"},
		{"machine", patchedELF(t, dir, "machine", func(h *elf.Header64) { h.Machine = uint16(other) }), "an ELF for " + other.String() + ", and this machine is " + runtime.GOARCH},
		{"phentsize", patchedELF(t, dir, "phentsize", func(h *elf.Header64) { h.Phentsize = 0 }), " program headers of 0 bytes; want 56 bytes each): copy or build it again"},
		{"phoff", patchedELF(t, dir, "phoff", func(h *elf.Header64) { h.Phoff = 1 << 40 }), "whose program headers end past its end: a truncated or damaged file"},
		{"executable", patchedELF(t, dir, "executable", func(h *elf.Header64) {}), ""},
		// The kernel reads no sections: such a program runs.
		{"sections", patchedELF(t, dir, "sections", func(h *elf.Header64) { h.Shoff = 1 << 40 }), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := runnable(tc.path, tc.path)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("runnable: %v", err)
				}
				if out, err := exec.Command(tc.path, "-test.run=^$").CombinedOutput(); err != nil {
					t.Fatalf("%s does not run: %v\n%s", tc.path, err, out)
				}
				return
			}
			if !errors.Is(err, ErrNotExecutable) || !strings.HasPrefix(err.Error(), tc.path+" is not a program this machine can run: ") || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("runnable: %v\nwant ErrNotExecutable saying %q", err, tc.want)
			}
			// The kernel agrees.
			if err := exec.Command(tc.path).Run(); !errors.Is(err, syscall.ENOEXEC) {
				t.Errorf("exec %s: %v, want ENOEXEC", tc.path, err)
			}
		})
	}
}

// TestStartExecFormatError: a rank whose exec fails with ENOEXEC, of any
// cause (here a file that runnable would have refused, started without
// it, as an agent's host does), is status 126 with a line that says what
// it means. It was status 1, "fork/exec ...: exec format error".
func TestStartExecFormatError(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "fakeelf")
	os.WriteFile(path, []byte("\x7fELF\x02\x01\x01\x00garbage"), 0o755)
	var out bytes.Buffer
	_, err := local{}.Start(&spec{Rank: rankPlan{Rank: 3}, Path: path, Env: os.Environ(), Stdout: nopCloser{&out}, Stderr: nopCloser{&out}})
	if err == nil {
		t.Fatal("started")
	}
	want := "rank 3: start " + path + ": not a program this machine can run (exec format error): an executable for another machine, a damaged or truncated one, or a script whose #! line names no interpreter"
	if err.Error() != want {
		t.Errorf("error %q\nwant %q", err, want)
	}
	if !errors.Is(err, syscall.ENOEXEC) {
		t.Errorf("error %v is not ENOEXEC", err)
	}
	if got := startFailure(err); got != 126 {
		t.Errorf("startFailure = %d, want 126", got)
	}
}
