package launch

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
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
