package prims

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/bits"
	"os"
	"slices"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/gorun-hpc/gorun/spmd"
	"github.com/gorun-hpc/gorun/spmd/contract"
	"github.com/gorun-hpc/gorun/topo"
)

// tuneTag is the collective-context tag on which rank 0 sends a
// communicator's decisions (beside noticeTag).
const tuneTag = noticeTag + 1

// tuned is the decisions of a decision table for one communicator: per
// collective the steps of its rule, or none where the model decides. Every
// rank of the communicator holds the same steps, rank 0's.
type tuned struct {
	steps [len(applicable)][]tunedStep
	// source says, on rank 0 only, which file and table they came from.
	source string
}

// tunedStep is a TuneStep parsed.
type tunedStep struct {
	from int
	algo topo.Algo
}

// lookup returns the table's algorithm for coll at bytes: that of the
// last step from at most bytes, or of the first step below it; ok is false
// where the table has no rule for coll.
func (t *tuned) lookup(coll topo.Collective, bytes int) (a topo.Algo, ok bool) {
	if t == nil || coll < 0 || int(coll) >= len(t.steps) || len(t.steps[coll]) == 0 {
		return "", false
	}
	s := t.steps[coll]
	i := sort.Search(len(s), func(i int) bool { return s[i].from > bytes })
	return s[max(i-1, 0)].algo, true
}

// tunedFrom parses a validated table.
func tunedFrom(tab *TuneTable, source string) *tuned {
	t := &tuned{source: source}
	for _, r := range tab.Rules {
		coll, _ := topo.ParseCollective(r.Collective)
		for _, s := range r.Steps {
			t.steps[coll] = append(t.steps[coll], tunedStep{s.From, topo.Algo(s.Algo)})
		}
	}
	return t
}

// tunedKey caches a communicator's decisions with Comm.SetValue, by the
// id of its collective context: a communicator split from another has a
// key of its own.
type tunedKey struct{ comm uint32 }

// tableFor returns the decisions of the decision table for c (nil: none,
// the model decides), caching them on c. The first call is collective, as
// topo.ModelFor's: rank 0 looks c's key up in its file (TuneFilePath) and
// sends what it found to every rank, so that every rank follows the same
// table whatever their files say.
func tableFor(ctx context.Context, c *spmd.Comm) (*tuned, error) {
	k := tunedKey{c.Collective().ID()}
	if t, ok := c.Value(k).(*tuned); ok {
		return t, nil
	}
	cc := c.Collective()
	var t *tuned
	if cc.Rank() == 0 {
		t = loadTuned(tuneFileOf(c), tuneKeyOf(c))
	}
	if cc.Size() > 1 {
		got, err := shareTuned(ctx, cc, t)
		if err != nil {
			return nil, fmt.Errorf("agreeing on the decision table of comm %d: %w", c.ID(), err)
		}
		if cc.Rank() != 0 {
			t = got
		}
	}
	c.SetValue(k, t)
	return t, nil
}

// tuneKeyOf returns the key of c's decisions: its hosts, ranks per host
// and transport. This machine's host id, which holds the boot id, is
// named by contract.MachineName instead, so that a table outlives a
// reboot; the ids of hosts in a host list are their names already.
func tuneKeyOf(c *spmd.Comm) TuneKey {
	lay := topo.LayoutOf(c)
	k := TuneKey{Hosts: slices.Clone(lay.HostIDs), Transport: tuneTransport(lay)}
	local := contract.LocalHostID()
	for i, id := range k.Hosts {
		if id == local {
			k.Hosts[i] = contract.MachineName()
		}
	}
	for _, h := range lay.Hosts {
		k.PerHost = append(k.PerHost, len(h))
	}
	return k
}

// tuneTransport names how the ranks laid out as lay reach each other:
// "shm" for ranks of one host that share memory, "tcp" for ranks of one
// host that do not (GORUN_TRANSPORT=tcp) or for one rank per host,
// "shm+tcp" for several hosts with several ranks on some.
func tuneTransport(lay topo.Layout) string {
	local := "shm"
	if os.Getenv(contract.EnvTransport) == "tcp" || len(lay.Hosts) == 1 && !lay.Shared {
		local = "tcp"
	}
	switch {
	case len(lay.Hosts) == 1:
		return local
	case lay.MaxPerHost() == 1 || local == "tcp":
		return "tcp"
	}
	return local + "+tcp"
}

// tuneFileOf returns the decision-table file of the rank of c that calls
// it: TuneFilePath; tests give the ranks of one process different files.
var tuneFileOf = func(*spmd.Comm) string { return TuneFilePath() }

// loadTuned returns the decisions of the decision-table file at path for
// key, or nil. A file that cannot be used is not the job's failure: it
// says so once on standard error, and the model decides.
func loadTuned(path string, key TuneKey) *tuned {
	if path == "" {
		return nil
	}
	f, err := tuneFiles.read(path)
	if err != nil {
		tuneFiles.warn(path, err)
		return nil
	}
	if f == nil {
		return nil
	}
	tab := f.Lookup(key)
	if tab == nil {
		return nil
	}
	return tunedFrom(tab, fmt.Sprintf("%s, measured on %s at %s", path, tab.MeasuredOn, tab.MeasuredAt.Format("2006-01-02 15:04 MST")))
}

// tuning is set while this process runs Tune: the file it is about to
// write may not exist yet.
var tuning atomic.Bool

// tuneFiles is the decision-table files this process has read.
var tuneFiles fileCache

// fileCache keeps decision-table files by path, read again when they
// change, and the paths it has warned about.
type fileCache struct {
	mu sync.Mutex
	// protects following
	files  map[string]cachedFile
	warned map[string]bool
}

type cachedFile struct {
	stamp [2]int64 // modification time and size
	f     *TuneFile
	err   error
}

// read returns the file at path: nil and no error when it does not exist
// and GORUN_TUNE_FILE did not name it, or this process is tuning (and
// writes it next).
func (fc *fileCache) read(path string) (*TuneFile, error) {
	fi, err := os.Stat(path)
	if err != nil {
		if !os.IsNotExist(err) {
			return nil, fmt.Errorf("%w: %v", ErrTuneFile, err)
		}
		if os.Getenv(contract.EnvTuneFile) == "" || tuning.Load() {
			return nil, nil
		}
		return nil, fmt.Errorf("%s names %s, which does not exist: run gorun --tune with this job's hosts and ranks to write it, or unset %s",
			contract.EnvTuneFile, path, contract.EnvTuneFile)
	}
	stamp := [2]int64{fi.ModTime().UnixNano(), fi.Size()}
	fc.mu.Lock()
	defer fc.mu.Unlock()
	if c, ok := fc.files[path]; ok && c.stamp == stamp {
		return c.f, c.err
	}
	f, err := ReadTuneFile(path)
	if fc.files == nil {
		fc.files = make(map[string]cachedFile)
	}
	fc.files[path] = cachedFile{stamp, f, err}
	return f, err
}

// warn says once per path why its decision tables are not used.
func (fc *fileCache) warn(path string, err error) {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	if fc.warned[path] {
		return
	}
	if fc.warned == nil {
		fc.warned = make(map[string]bool)
	}
	fc.warned[path] = true
	fmt.Fprintf(os.Stderr, "gorun: not using the decision tables: %v; the model chooses the algorithms\n", err)
}

// tunedLen bounds an encoded tuned: its first byte, per collective its
// index and number of steps, and per step its size and algorithm.
const tunedLen = 1 + len(applicable)*(2+maxSteps*9)

// shareTuned sends rank 0's t to every rank of cc by a binomial tree, as
// topo sends rank 0's model, and returns what rank 0 sent.
func shareTuned(ctx context.Context, cc *spmd.Comm, t *tuned) (*tuned, error) {
	msg := make([]byte, tunedLen)
	n := 0
	if cc.Rank() == 0 {
		msg = encodeTuned(t)
		n = len(msg)
	}
	r, p := cc.Rank(), cc.Size()
	mask := 1
	if r > 0 {
		mask = 1 << (bits.Len(uint(r)) - 1) // r's highest bit: r got it from r-mask
		got, err := cc.Recv(ctx, r-mask, tuneTag, msg)
		if err != nil {
			return nil, err
		}
		n = got
		mask <<= 1
	}
	for ; r+mask < p; mask <<= 1 {
		if r < mask {
			if err := cc.Send(ctx, r+mask, tuneTag, msg[:n]); err != nil {
				return nil, err
			}
		}
	}
	return decodeTuned(msg[:n])
}

// encodeTuned encodes t: nothing for nil, else a byte that says there is
// a table, then per covered collective its index, its number of steps,
// and per step its size (8 bytes) and its algorithm's index in
// topo.AllAlgos.
func encodeTuned(t *tuned) []byte {
	if t == nil {
		return nil
	}
	b := []byte{1}
	for coll, steps := range t.steps {
		if len(steps) == 0 {
			continue
		}
		b = append(b, byte(coll), byte(len(steps)))
		for _, s := range steps {
			b = binary.LittleEndian.AppendUint64(b, uint64(s.from))
			b = append(b, byte(algoIndex(s.algo)))
		}
	}
	return b
}

func decodeTuned(b []byte) (*tuned, error) {
	if len(b) == 0 {
		return nil, nil
	}
	bad := fmt.Errorf("rank 0 sent a malformed decision table (%d bytes)", len(b))
	t := &tuned{}
	for i := 1; i < len(b); {
		if i+2 > len(b) || int(b[i]) >= len(t.steps) {
			return nil, bad
		}
		coll, n := b[i], int(b[i+1])
		i += 2
		for range n {
			if i+9 > len(b) || int(b[i+8]) >= len(topo.AllAlgos) {
				return nil, bad
			}
			from := int(binary.LittleEndian.Uint64(b[i:]))
			t.steps[coll] = append(t.steps[coll], tunedStep{from, topo.AllAlgos[b[i+8]]})
			i += 9
		}
	}
	return t, nil
}

func algoIndex(a topo.Algo) int {
	for i, x := range topo.AllAlgos {
		if x == a {
			return i
		}
	}
	return 0 // validated: never
}
