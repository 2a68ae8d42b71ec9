package dp

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/gorun-hpc/gorun/prims"
	"github.com/gorun-hpc/gorun/spmd"
	"github.com/gorun-hpc/gorun/strategies/internal/replica"
	"github.com/gorun-hpc/gorun/strategies/nn"
)

// Config says how DDP buckets and reduces gradients.
type Config struct {
	BucketCap   int  // bytes; DefaultBucketCap when 0
	FirstBucket int  // bytes; DefaultFirstBucket when 0, capped at BucketCap
	Hook        Hook // AllReduceMean when nil
	// Observe, when set, is called with each event of a step, from the
	// goroutine that causes it (reductions that complete call it from
	// a goroutine of their own).
	Observe func(Event)
}

// EventKind says what happened.
type EventKind uint8

// The events of a step.
const (
	BackwardStart EventKind = iota + 1
	BackwardEnd
	BucketIssued  // the bucket's reduction was started
	BucketReduced // the bucket's reduction completed
	WaitEnd       // every bucket is reduced and averaged
)

var eventNames = [...]string{"", "backward-start", "backward-end", "bucket-issued", "bucket-reduced", "wait-end"}

func (k EventKind) String() string { return eventNames[k] }

// Event is one step event; Bucket is -1 for those of no bucket.
type Event struct {
	Kind   EventKind
	Bucket int
	Time   time.Time
}

// DDP is one rank's data-parallel driver for a model. It is used by one
// goroutine: Forward, Backward, then Wait, then the optimizer step.
type DDP struct {
	model   nn.Model
	comm    *spmd.Comm
	cfg     Config
	buckets []*Bucket
	offsets []int // each parameter's first element, in layout order

	// One step's progress.
	ctx     context.Context
	seen    []int // per parameter, elements reported ready
	left    []int // per bucket, elements not yet ready
	next    int   // next bucket to issue
	works   []Work
	err     error
	watch   sync.WaitGroup // the goroutines that observe reductions end
	noSync  bool
	pending bool // a synced Backward ran and Wait has not
}

// New makes a DDP driver on comm, which every rank of comm calls with a
// model of the same layout: it duplicates comm for its own traffic, checks
// the layouts agree, and broadcasts rank 0's parameters to every rank.
func New(ctx context.Context, comm *spmd.Comm, model nn.Model, cfg Config) (*DDP, error) {
	st := model.Store()
	if err := checkLayout(st.Params, len(st.W)); err != nil {
		return nil, fmt.Errorf("dp: %w", err)
	}
	if cfg.BucketCap <= 0 {
		cfg.BucketCap = DefaultBucketCap
	}
	if cfg.FirstBucket <= 0 {
		cfg.FirstBucket = DefaultFirstBucket
	}
	cfg.FirstBucket = min(cfg.FirstBucket, cfg.BucketCap)
	if cfg.Hook == nil {
		cfg.Hook = AllReduceMean{}
	}
	c, err := comm.Dup(ctx)
	if err != nil {
		return nil, fmt.Errorf("dp: %w", err)
	}
	if err := replica.Same(ctx, c, st, "dp"); err != nil {
		c.Free()
		return nil, err
	}
	if err := prims.Broadcast(ctx, c, st.W, 0); err != nil {
		c.Free()
		return nil, fmt.Errorf("dp: broadcasting rank 0's parameters: %w", err)
	}
	d := &DDP{model: model, comm: c, cfg: cfg}
	d.buckets = plan(st.Params, st.G, cfg.FirstBucket, cfg.BucketCap)
	for _, p := range st.Params {
		d.offsets = append(d.offsets, p.Offset)
	}
	d.seen = make([]int, len(st.Params))
	d.left = make([]int, len(d.buckets))
	d.works = make([]Work, len(d.buckets))
	return d, nil
}

// Comm is the driver's own communicator (a duplicate of the one New got).
func (d *DDP) Comm() *spmd.Comm { return d.comm }

// Buckets lists the buckets, in the order they are reduced.
func (d *DDP) Buckets() []*Bucket { return d.buckets }

// Model is the model the driver runs.
func (d *DDP) Model() nn.Model { return d.model }

// Forward runs the model's forward pass on this rank's batch.
func (d *DDP) Forward(b *nn.Batch, train bool) (float32, error) { return d.model.Forward(b, train) }

// NoSync runs f (forward and backward of micro-steps) with gradient
// reduction off: the gradients accumulate locally, and the next Backward
// outside NoSync reduces their sum (PyTorch's no_sync).
func (d *DDP) NoSync(f func() error) error {
	d.noSync = true
	defer func() { d.noSync = false }()
	return f()
}

// Backward runs the model's backward pass for scale·loss. Outside NoSync
// it issues each bucket's reduction as soon as backward has produced all
// of the bucket's gradients; Wait completes them.
func (d *DDP) Backward(ctx context.Context, scale float32) {
	st := d.model.Store()
	if d.noSync {
		st.OnReadyRange(nil)
		d.model.Backward(scale)
		return
	}
	d.ctx, d.err, d.next, d.pending = ctx, nil, 0, true
	clear(d.seen)
	for i, b := range d.buckets {
		d.left[i] = b.Hi - b.Lo
		d.works[i] = nil
	}
	d.observe(BackwardStart, -1)
	st.OnReadyRange(d.ready)
	d.model.Backward(scale)
	st.OnReadyRange(nil)
	d.observe(BackwardEnd, -1)
}

// ready notes the gradients [lo, hi) done and issues the buckets that
// are complete, in bucket order. A range reported twice is an error that
// Wait returns; it is not counted again.
func (d *DDP) ready(lo, hi int) {
	pi := sort.SearchInts(d.offsets, lo+1) - 1
	p := d.model.Store().Params[pi]
	if d.seen[pi]+hi-lo > p.Len() || hi > p.End() {
		d.err = errors.Join(d.err, fmt.Errorf("dp: backward reported gradients [%d, %d) of %s ready twice", lo-p.Offset, hi-p.Offset, p.Name))
		return
	}
	d.seen[pi] += hi - lo
	first, last := within(d.buckets, lo, hi)
	for i := first; i < last; i++ {
		b := d.buckets[i]
		d.left[i] -= min(hi, b.Hi) - max(lo, b.Lo)
	}
	for d.next < len(d.buckets) && d.left[d.next] == 0 {
		d.issue(d.next)
		d.next++
	}
}

func (d *DDP) issue(i int) {
	b := d.buckets[i]
	w, err := d.cfg.Hook.Start(d.ctx, d.comm, b)
	if err != nil {
		d.err = errors.Join(d.err, fmt.Errorf("dp: bucket %d: %w", i, err))
		return
	}
	d.works[i] = w
	d.observe(BucketIssued, i)
	if d.cfg.Observe != nil {
		if dw, ok := w.(interface{ Done() <-chan struct{} }); ok {
			d.watch.Add(1)
			go func() {
				defer d.watch.Done()
				<-dw.Done()
				d.observe(BucketReduced, i)
			}()
		}
	}
}

// Wait completes the step's reductions: afterwards every rank's gradients
// are the mean over the ranks. A parameter that backward never reported
// is an error naming it; its buckets are reduced all the same, so that the
// other ranks' collectives complete.
func (d *DDP) Wait(ctx context.Context) error {
	if !d.pending {
		return nil
	}
	d.pending = false
	var missing []string
	for i, n := range d.seen {
		if p := d.model.Store().Params[i]; n != p.Len() {
			missing = append(missing, d.model.Store().Params[i].Name)
		}
	}
	for ; d.next < len(d.buckets); d.next++ {
		d.issue(d.next)
	}
	err := d.err
	for i, w := range d.works {
		if w == nil {
			continue
		}
		if werr := w.Wait(ctx); werr != nil {
			err = errors.Join(err, fmt.Errorf("dp: bucket %d: %w", i, werr))
		}
	}
	if err == nil {
		d.watch.Wait() // the reductions are done: their observers are about to be
	}
	d.observe(WaitEnd, -1)
	if len(missing) > 0 {
		err = errors.Join(fmt.Errorf("dp: backward produced no gradient for %s: every parameter must take part in the loss (or be left out of the model)", strings.Join(missing, ", ")), err)
	}
	return err
}

// Close lets go of the driver's communicator. Every rank calls it.
func (d *DDP) Close() error { return d.comm.Free() }

func (d *DDP) observe(k EventKind, bucket int) {
	if d.cfg.Observe != nil {
		d.cfg.Observe(Event{Kind: k, Bucket: bucket, Time: time.Now()})
	}
}
