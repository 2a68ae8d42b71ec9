package launch

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
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
	if !bytes.HasPrefix(head, []byte(elf.ELFMAG)) {
		return errorf(ErrNotExecutable, "%s is not a program this machine can run (no #! line, not an ELF for this machine)", name)
	}
	if why := elfProblem(f); why != "" {
		return errorf(ErrNotExecutable, "%s is not a program this machine can run: %s", name, why)
	}
	return nil
}

// elfProblem says why the kernel would refuse the ELF file f at exec, as
// its ELF loader (fs/binfmt_elf.c) checks the file header and the size of
// the program headers, or returns "". Sections, which the kernel does
// not read, are not looked at: debug/elf.NewFile, which reads them too,
// would refuse programs that run.
func elfProblem(f *os.File) string {
	fi, err := f.Stat()
	if err != nil {
		return ""
	}
	size := fi.Size()
	var ident [elf.EI_NIDENT]byte
	if _, err := f.ReadAt(ident[:], 0); err != nil {
		return fmt.Sprintf("an ELF file of %d bytes, cut short in its header: a truncated or damaged file; copy or build it again", size)
	}
	var order binary.ByteOrder
	switch elf.Data(ident[elf.EI_DATA]) {
	case elf.ELFDATA2LSB:
		order = binary.LittleEndian
	case elf.ELFDATA2MSB:
		order = binary.BigEndian
	default:
		return fmt.Sprintf("an ELF file of unknown byte order (%d): a damaged file, or not a program", ident[elf.EI_DATA])
	}
	var typ elf.Type
	var machine elf.Machine
	var hsize, phentsize, want, phnum int
	var phoff uint64
	r := io.NewSectionReader(f, 0, size)
	switch elf.Class(ident[elf.EI_CLASS]) {
	case elf.ELFCLASS64:
		var h elf.Header64
		err = binary.Read(r, order, &h)
		typ, machine, phoff, phentsize, phnum = elf.Type(h.Type), elf.Machine(h.Machine), h.Phoff, int(h.Phentsize), int(h.Phnum)
		hsize, want = binary.Size(h), binary.Size(elf.Prog64{})
	case elf.ELFCLASS32:
		var h elf.Header32
		err = binary.Read(r, order, &h)
		typ, machine, phoff, phentsize, phnum = elf.Type(h.Type), elf.Machine(h.Machine), uint64(h.Phoff), int(h.Phentsize), int(h.Phnum)
		hsize, want = binary.Size(h), binary.Size(elf.Prog32{})
	default:
		return fmt.Sprintf("an ELF file of unknown class (%d): a damaged file, or not a program", ident[elf.EI_CLASS])
	}
	if err != nil {
		return fmt.Sprintf("an ELF file of %d bytes, cut short in its %d-byte header: a truncated or damaged file; copy or build it again", size, hsize)
	}
	switch typ {
	case elf.ET_EXEC, elf.ET_DYN:
	case elf.ET_REL:
		return "an ELF relocatable object (a .o file), not an executable: link it into a program"
	case elf.ET_CORE:
		return "an ELF core dump, not an executable"
	default:
		return fmt.Sprintf("an ELF file of type %v, not an executable: a damaged file, or not a program", typ)
	}
	if m, known := elfMachines[runtime.GOARCH]; known && machine != m {
		return fmt.Sprintf("an ELF for %v, and this machine is %s", machine, runtime.GOARCH)
	}
	switch {
	case phentsize != want || phnum == 0 || phnum*phentsize > 65536:
		return fmt.Sprintf("an ELF executable whose header is damaged (%d program headers of %d bytes; want %d bytes each): copy or build it again", phnum, phentsize, want)
	case phoff > uint64(size) || uint64(size)-phoff < uint64(phnum*phentsize):
		return fmt.Sprintf("an ELF executable of %d bytes whose program headers end past its end: a truncated or damaged file; copy or build it again", size)
	}
	return ""
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

// startCmd starts cmd, as every rank is started, and says what an exec
// format error (ENOEXEC) means, of whatever cause: exec's own words named
// none, and the program had passed runnable, or runnable was not asked (an
// agent's host, a file changed since).
func startCmd(cmd *exec.Cmd) error {
	err := cmd.Start()
	if errors.Is(err, syscall.ENOEXEC) {
		return &execFormatError{err}
	}
	return err
}

// execFormatError is an exec that the kernel refused with ENOEXEC.
type execFormatError struct{ err error }

func (e *execFormatError) Error() string {
	return "not a program this machine can run (exec format error): an executable for another machine, a damaged or truncated one, or a script whose #! line names no interpreter"
}

func (e *execFormatError) Unwrap() error { return e.err }
