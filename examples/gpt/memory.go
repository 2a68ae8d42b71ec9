package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/gorun-hpc/gorun/prims"
	"github.com/gorun-hpc/gorun/spmd"
	"github.com/gorun-hpc/gorun/strategies/hybrid"
	"github.com/gorun-hpc/gorun/strategies/hybrid/plan"
	"github.com/gorun-hpc/gorun/strategies/pipe"
)

// checkMemory refuses, on every rank alike, a configuration whose most
// loaded rank would hold more than the least a rank of the job has: what
// --plan's memory model estimates (parameters, gradients, AdamW's state
// and the activations in flight) against the host's available memory
// (MemAvailable, or its cgroup's limit if that is lower) shared among its
// ranks. The model counts the buffers the engine keeps, not the Go
// runtime's own or a collective's temporaries, so it errs low: past it
// the job would die out of memory. A host that says nothing of its
// memory is not checked.
func checkMemory(ctx context.Context, w *spmd.World, c config, cfg hybrid.Config) error {
	l := plan.Layout{TP: cfg.TP, PP: cfg.PP, DP: cfg.DP, Zero: cfg.Zero, Micro: cfg.Micro, Schedule: cfg.Schedule, Virtual: cfg.Virtual, SeqParallel: cfg.SeqParallel}
	if l.PP == 1 {
		l.Schedule = pipe.NameOneFOneB // without a pipeline the micro-batches run one at a time
	}
	job := plan.Job{Model: cfg.Model, Seq: c.block, GlobalBatch: c.batch, Ranks: w.Size()}
	est, err := plan.EstimateMemory(job, l, plan.Coeffs{})
	if err != nil {
		return nil // the engine says what is wrong with the layout in its own words
	}
	have, where := rankMemory(osFiles{}, w.LocalSize())
	least := []float64{math.Inf(1)}
	if have > 0 {
		least[0] = float64(have)
	}
	if err := prims.AllReduce(ctx, w.Comm, least, prims.Min[float64]()); err != nil {
		return err
	}
	if float64(est.Memory) <= least[0] {
		return nil
	}
	return fmt.Errorf("this configuration needs about %s a rank (%s; --plan's memory model), more than the %s a rank has (%s): %s",
		plan.GiB(est.Memory), parts(est), plan.GiB(int64(least[0])), where, advice(c, est))
}

// parts says what an estimate's memory is made of, the larger first.
func parts(e plan.Estimate) string {
	state := fmt.Sprintf("parameters, gradients and optimizer state %s", plan.GiB(e.Params+e.Grads+e.Optim))
	act := fmt.Sprintf("activations %s", plan.GiB(e.Activations))
	if e.Activations >= e.Params+e.Grads+e.Optim {
		return act + ", " + state
	}
	return state + ", " + act
}

// advice names the flags that lower what dominates the estimate.
func advice(c config, e plan.Estimate) string {
	if e.Activations >= e.Params+e.Grads+e.Optim {
		return fmt.Sprintf("lower --block %d (attention keeps --heads x --block² floats a sequence and layer), --batch %d or --layers %d, raise --microbatches %d, or split the layers over more ranks with --tp or --pp",
			c.block, c.batch, c.layers, c.micro)
	}
	return fmt.Sprintf("lower --embd %d, --layers %d or --vocab, shard the state with --zero over more replicas, or split the model over more ranks with --tp or --pp",
		c.embd, c.layers)
}

// files reads the system files that say how much memory there is.
type files interface {
	ReadFile(path string) ([]byte, error)
}

// osFiles reads the machine's own.
type osFiles struct{}

func (osFiles) ReadFile(path string) ([]byte, error) { return os.ReadFile(path) }

// rankMemory is a rank's share of its host's available memory: the least
// of MemAvailable (/proc/meminfo) and the memory limits of the cgroups
// the process is in (v2's memory.max, v1's memory.limit_in_bytes, up to
// the root), over the host's ranks; and how it was found, for people.
// It returns 0 when neither can be read.
func rankMemory(fs files, ranks int) (int64, string) {
	have, where := int64(0), ""
	if n, ok := memAvailable(fs); ok {
		have, where = n, "MemAvailable "+plan.GiB(n)
	}
	if n, path, ok := cgroupLimit(fs); ok && (have == 0 || n < have) {
		have, where = n, fmt.Sprintf("the cgroup limit %s in %s", plan.GiB(n), path)
	}
	if have == 0 {
		return 0, ""
	}
	ranks = max(ranks, 1)
	return have / int64(ranks), fmt.Sprintf("the least over the job's hosts; here %s over %s", where, plural(ranks, "rank"))
}

// plural says "1 rank" or "N ranks".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// memAvailable reads MemAvailable from /proc/meminfo, in bytes.
func memAvailable(fs files) (int64, bool) {
	b, err := fs.ReadFile("/proc/meminfo")
	if err != nil {
		return 0, false
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 2 && f[0] == "MemAvailable:" {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			return kb << 10, err == nil && kb > 0
		}
	}
	return 0, false
}

// cgroupLimit is the lowest memory limit of the cgroups the process is
// in, and the file that set it: for each line of /proc/self/cgroup that
// names the memory controller (v1) or the unified hierarchy (v2), the
// limit files of its directory and those above it, as mounted under
// /sys/fs/cgroup. "max" and v1's huge "unlimited" values are no limit.
func cgroupLimit(fs files) (int64, string, bool) {
	b, err := fs.ReadFile("/proc/self/cgroup")
	if err != nil {
		return 0, "", false
	}
	var best int64
	var from string
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.SplitN(sc.Text(), ":", 3)
		if len(f) != 3 {
			continue
		}
		var root, file string
		switch {
		case f[0] == "0" && f[1] == "":
			root, file = "/sys/fs/cgroup", "memory.max"
		case hasController(f[1], "memory"):
			root, file = "/sys/fs/cgroup/memory", "memory.limit_in_bytes"
		default:
			continue
		}
		for dir := filepath.Clean(f[2]); ; dir = filepath.Dir(dir) {
			path := filepath.Join(root, dir, file)
			if n, ok := readLimit(fs, path); ok && (best == 0 || n < best) {
				best, from = n, path
			}
			if dir == "/" || dir == "." {
				break
			}
		}
	}
	return best, from, best > 0
}

// hasController says whether a v1 line's controllers name c.
func hasController(list, c string) bool {
	for _, x := range strings.Split(list, ",") {
		if x == c {
			return true
		}
	}
	return false
}

// readLimit reads one limit file: a number of bytes, or "max".
func readLimit(fs files, path string) (int64, bool) {
	b, err := fs.ReadFile(path)
	if err != nil {
		return 0, false
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil || n <= 0 || n >= 1<<62 { // v1 writes about 2^63 for none
		return 0, false
	}
	return n, true
}
