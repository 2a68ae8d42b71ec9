package launch

import (
	"bytes"
	"debug/elf"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
)

// runnable checks what the kernel will check at exec, to say it better
// than exec does, once and before any rank starts: a script's #!
// interpreter must exist (exec said "no such file or directory" of the
// script), and a file without #! must be an ELF of this machine (exec
// said "exec format error"). A file gorun cannot read passes.
func runnable(name, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	head := make([]byte, 256) // the kernel's BINPRM_BUF_SIZE
	n, _ := io.ReadFull(f, head)
	head = head[:n]
	if line, ok := bytes.CutPrefix(head, []byte("#!")); ok {
		return interpreterOK(name, line)
	}
	if runtime.GOOS != "linux" {
		return nil // Mach-O and others: left to exec
	}
	notHere := errorf(ErrNotExecutable, "%s is not a program this machine can run (no #! line, not an ELF for this machine)", name)
	if !bytes.HasPrefix(head, []byte(elf.ELFMAG)) {
		return notHere
	}
	want, known := elfMachines[runtime.GOARCH]
	if ef, err := elf.NewFile(f); err == nil && known && ef.Machine != want {
		return errorf(ErrNotExecutable, "%s is not a program this machine can run: an ELF for %v, and this machine is %s", name, ef.Machine, runtime.GOARCH)
	}
	return nil
}

// elfMachines are the ELF machines of the GOARCHes gorun knows; others
// are not checked.
var elfMachines = map[string]elf.Machine{
	"amd64": elf.EM_X86_64, "386": elf.EM_386, "arm64": elf.EM_AARCH64, "arm": elf.EM_ARM,
	"ppc64le": elf.EM_PPC64, "ppc64": elf.EM_PPC64, "riscv64": elf.EM_RISCV, "s390x": elf.EM_S390,
	"loong64": elf.EM_LOONGARCH, "mips64le": elf.EM_MIPS, "mips64": elf.EM_MIPS,
}

// shebang splits what follows a file's #! as Linux does
// (fs/binfmt_script.c): the line ends at its newline, trailing spaces and
// tabs are dropped, the interpreter is the first word (spaces and tabs
// separate), and the rest, after spaces and tabs, is one argument. Any
// other byte, a \r among them, is part of a word.
func shebang(line []byte) (interp, arg string) {
	if i := bytes.IndexByte(line, '\n'); i >= 0 {
		line = line[:i]
	}
	if i := bytes.IndexByte(line, 0); i >= 0 {
		line = line[:i] // the kernel reads C strings
	}
	s := strings.Trim(string(line), " \t")
	i := strings.IndexAny(s, " \t")
	if i < 0 {
		return s, ""
	}
	return s[:i], strings.TrimLeft(s[i:], " \t")
}

// interpreterOK checks the #! line of script name (line follows the #!):
// that it names an interpreter, and that an interpreter named by an
// absolute path exists (a relative one is found from the rank's working
// directory, which exec sees and gorun does not check). A \r that ends
// the line, the mark of Windows line endings, is said so.
func interpreterOK(name string, line []byte) error {
	interp, arg := shebang(line)
	if interp == "" {
		return errorf(ErrNotExecutable, "%s: its #! line names no interpreter: write one, as in #!/bin/sh", name)
	}
	if !filepath.IsAbs(interp) {
		return nil
	}
	if _, err := os.Stat(interp); !errors.Is(err, os.ErrNotExist) {
		// The interpreter is there. /usr/bin/env looks its argument up
		// on PATH, and a \r there is the same mistake.
		if filepath.Base(interp) == "env" && strings.HasSuffix(arg, "\r") && !strings.ContainsAny(arg, " \t") {
			if _, err := exec.LookPath(arg); err != nil {
				return errorf(errNotFound, "%s: its #! line runs %s %q, which is not on PATH: %s", name, interp, arg, crlfHint(name))
			}
		}
		return nil
	}
	if strings.HasSuffix(interp, "\r") {
		return errorf(errNotFound, "%s: its #! line names %q, which does not exist: %s", name, interp, crlfHint(name))
	}
	return errorf(errNotFound, "%s: its #! line names %s, which does not exist: install it or fix the line", name, interp)
}

// crlfHint says that script name has Windows line endings, whose \r the
// kernel takes as part of the #! line, and how to convert them.
func crlfHint(name string) string {
	q := shellQuote(name)
	return "the file has Windows (CRLF) line endings, and the \\r at the end of its #! line is taken as part of the name; convert them with sed -i 's/\\r$//' " + q + " (or dos2unix " + q + ")"
}
