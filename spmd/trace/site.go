package trace

import (
	"fmt"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
)

// siteDepth is how many frames a call site is looked for in.
const siteDepth = 16

// internal are the packages whose frames a call site skips: the site of a
// call is where the program (or a training driver) made it.
var internal = []string{
	"runtime.",
	"github.com/gorun-hpc/gorun/spmd.",
	"github.com/gorun-hpc/gorun/spmd/trace.",
	"github.com/gorun-hpc/gorun/prims.",
	"github.com/gorun-hpc/gorun/topo.",
}

// Site returns the id of the calling code's call site: the first frame
// outside spmd, prims and topo, as "function file:line". Walking the frame
// pointers costs a few nanoseconds on amd64; the name is resolved the
// first time a stack is seen.
func (r *Recorder) Site() uint32 {
	if r == nil {
		return 0
	}
	var s Stack
	s.n = callers(s.pcs[:])
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.siteLocked(&s)
}

// Stack is a call stack taken by Caller, to be resolved to its call site
// only when its event is recorded (RecordStack), under the lock that
// recording takes anyway.
type Stack struct {
	pcs [siteDepth]uintptr
	n   int
}

// Caller fills s with the calling code's stack. It takes no lock.
func (r *Recorder) Caller(s *Stack) {
	if r == nil {
		return
	}
	s.n = callers(s.pcs[:])
}

// siteLocked returns the site of stack s.
func (r *Recorder) siteLocked(s *Stack) uint32 {
	if s.n == 0 {
		return 0
	}
	h := uint64(s.n)
	for _, pc := range s.pcs[:s.n] {
		h = (h ^ uint64(pc)) * 0x100000001b3
	}
	slot := &r.recent[h%recentSites]
	if slot.id != 0 && slot.pcs == s.pcs {
		return slot.id
	}
	id, ok := r.sites[s.pcs]
	if !ok {
		// A copy: CallersFrames keeps its slice, which would make the
		// stack escape to the heap on every call, not only this first one.
		id = r.internLocked(siteName(slices.Clone(s.pcs[:s.n])))
		r.sites[s.pcs] = id
	}
	*slot = recentSite{pcs: s.pcs, id: id}
	return id
}

// recentSites is how many stacks a recorder remembers without a map
// lookup, hashed: a loop's few call sites.
const recentSites = 32

// recentSite is a stack whose site was looked up.
type recentSite struct {
	pcs [siteDepth]uintptr
	id  uint32
}

// siteName resolves the first frame of pcs (return addresses) outside the
// internal packages.
func siteName(pcs []uintptr) string {
	frames := runtime.CallersFrames(pcs)
	var last runtime.Frame
	for {
		f, more := frames.Next()
		if f.Function != "" && !isInternal(f.Function) {
			return frameName(f)
		}
		if f.Function != "" {
			last = f
		}
		if !more {
			break
		}
	}
	if last.Function == "" {
		return "?"
	}
	return frameName(last)
}

func isInternal(fn string) bool {
	// The wrappers of go and defer statements, which runtime.Callers
	// hides and the frame-pointer walk does not.
	if strings.Contains(fn, ".gowrap") || strings.Contains(fn, ".deferwrap") {
		return true
	}
	for _, p := range internal {
		if strings.HasPrefix(fn, p) {
			return true
		}
	}
	return false
}

// frameName is "pkg.Func dir/file.go:line", the file with its directory.
func frameName(f runtime.Frame) string {
	fn := f.Function
	if i := strings.LastIndexByte(fn, '/'); i >= 0 {
		fn = fn[i+1:]
	}
	file := filepath.Join(filepath.Base(filepath.Dir(f.File)), filepath.Base(f.File))
	return fmt.Sprintf("%s %s:%d", fn, file, f.Line)
}
