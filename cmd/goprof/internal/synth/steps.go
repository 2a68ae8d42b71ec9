package synth

import "time"

// Training writes steps of a data-parallel training job on every rank
// until the job holds about events events: each step marks step, forward,
// backward, wait and optimizer regions, issues buckets non-blocking
// all-reduces overlapped with backward, all-reduces the loss, passes a
// token around a ring of sends and receives, and samples the heap. Rank
// r computes a little longer than rank r-1, so the job has stragglers.
func (j *Job) Training(events int) {
	const buckets = 8
	perStep := 6 + buckets + 1 + 2 + 2 // regions, buckets, loss, send+recv, heap
	steps := max(1, events/(perStep*j.Size))
	step := 10 * time.Millisecond
	for s := 0; s < steps; s++ {
		t0 := time.Duration(s) * step
		for r := 0; r < j.Size; r++ {
			x := j.Rank(r)
			slow := time.Duration(r) * 20 * time.Microsecond
			fwd, bwd := t0+3*time.Millisecond+slow, t0+7*time.Millisecond+slow
			x.Region("step", t0, t0+step-100*time.Microsecond)
			x.Region("forward", t0, fwd)
			x.Region("backward", fwd, bwd)
			for b := 0; b < buckets; b++ {
				at := fwd + time.Duration(b)*400*time.Microsecond
				x.Collective(Coll{Op: "allreduce", Algo: "ring", Bytes: 1 << 20, Predicted: 600 * time.Microsecond,
					Site: "dp.AllReduceMean.Start dp/hook.go:43", NonBlocking: true}, at, at+700*time.Microsecond)
			}
			x.Region("wait", bwd, bwd+500*time.Microsecond)
			x.Region("optimizer", bwd+500*time.Microsecond, t0+9*time.Millisecond)
			x.Collective(Coll{Op: "allreduce", Algo: "recdbl", Bytes: 8, Site: "main.run ddp/run.go:80"}, t0+9*time.Millisecond+slow, t0+9*time.Millisecond+200*time.Microsecond)
			next, prev := (r+1)%j.Size, (r+j.Size-1)%j.Size
			x.Send(next, 1, 4096, t0+9500*time.Microsecond, t0+9600*time.Microsecond)
			x.Recv(prev, 1, 4096, t0+9500*time.Microsecond, t0+9700*time.Microsecond)
			x.Heap(t0+time.Millisecond, int64(64<<20+s%7<<20))
			x.Heap(bwd, int64(96<<20+s%5<<20))
		}
	}
}
