// Package report analyses a loaded job (package job): where each rank's
// time went, per operation and call site (as mpiP reports), load
// imbalance, wait states (late senders, waits at collectives, stragglers,
// as Scalasca finds them), the POP efficiencies, the bandwidth collectives
// achieved beside the cost model's prediction, and, for training jobs, the
// step breakdown that PyTorch's profiler and Holistic Trace Analysis show. A Report is
// plain data: goprof prints it as text or JSON, draws it, or diffs two.
package report

import (
	"github.com/gorun-hpc/gorun/cmd/goprof/internal/job"
	"github.com/gorun-hpc/gorun/spmd/trace"
)

// Report is the analysis of one job. Times are nanoseconds.
type Report struct {
	Job        Info            `json:"job"`
	Ranks      []RankStat      `json:"ranks"`
	Ops        []OpStat        `json:"ops"`   // per operation
	Sites      []OpStat        `json:"sites"` // per operation and call site
	Regions    []RegionStat    `json:"regions"`
	Imbalance  Imbalance       `json:"imbalance"`
	POP        POP             `json:"pop"`
	LateSender LateSender      `json:"late_sender"`
	CollWait   CollectiveWait  `json:"wait_at_collective"`
	Stragglers []Straggler     `json:"stragglers"`
	Bandwidth  []BandwidthStat `json:"bandwidth"`
	Steps      *StepBreakdown  `json:"steps,omitempty"`
	Pipeline   *Pipeline       `json:"pipeline,omitempty"`
}

// Info describes the job and what is missing from its traces.
type Info struct {
	Dir      string   `json:"dir"`
	ID       string   `json:"id,omitempty"`
	Program  string   `json:"program,omitempty"`
	Size     int      `json:"size"`
	Ranks    []int    `json:"ranks"` // the ranks analysed
	Missing  []int    `json:"missing,omitempty"`
	Problems []string `json:"problems,omitempty"`
	Cut      []int    `json:"cut_short,omitempty"` // ranks whose trace lacks its end record (the rank died, was killed or runs still)
	// LeftOut are the ranks the figures that compare ranks (Imbalance,
	// POP, RegionStat.CV, Bandwidth) leave out: without events, or cut
	// short beside whole ones. Notes say so for people.
	LeftOut  []int    `json:"left_out,omitempty"`
	Restart  int      `json:"restart,omitempty"`        // which start of a job gorun restarted this is
	Earlier  []string `json:"earlier_starts,omitempty"` // the directories of its earlier starts' traces
	Notes    []string `json:"notes,omitempty"`
	Duration int64    `json:"duration_ns"`
	Events   int      `json:"events"`
}

// RankStat is one rank's time.
type RankStat struct {
	Rank      int     `json:"rank"`
	Host      string  `json:"host"`
	Wall      int64   `json:"wall_ns"` // its first event's start to its last's end
	App       int64   `json:"app_ns"`  // wall less communication
	Comm      int64   `json:"comm_ns"` // time the rank spent inside blocking communication calls
	CommShare float64 `json:"comm_share"`
	Async     int64   `json:"async_comm_ns"` // non-blocking collectives in flight (may overlap App)
	HeapPeak  int64   `json:"heap_peak_bytes"`
	Events    int     `json:"events"`
	Offset    int64   `json:"clock_offset_ns"` // added to its times for rank 0's clock: on one host, how much later than rank 0 its trace began
	RTT       int64   `json:"clock_rtt_ns"`
	Complete  bool    `json:"complete"` // its trace ended with its end record
}

// OpStat is the calls of one operation (and call site).
type OpStat struct {
	Op    string   `json:"op"`
	Site  string   `json:"site,omitempty"`
	Count int      `json:"count"`
	Total int64    `json:"total_ns"`
	Mean  int64    `json:"mean_ns"`
	Max   int64    `json:"max_ns"`
	Bytes int64    `json:"bytes"`
	Share float64  `json:"comm_share"` // of all ranks' communication time (blocking calls)
	Sizes []Bucket `json:"sizes"`      // calls by message size
}

// Bucket counts the calls of sizes up to Upto bytes (and more than the
// previous bucket's).
type Bucket struct {
	Upto  int64 `json:"upto_bytes"`
	Count int   `json:"count"`
}

// RegionStat is the regions of one name, over all ranks.
type RegionStat struct {
	Name  string  `json:"name"`
	Count int     `json:"count"`
	Total int64   `json:"total_ns"`
	Mean  int64   `json:"mean_ns"`
	Max   int64   `json:"max_ns"`
	CV    float64 `json:"rank_cv"` // coefficient of variation of the ranks' totals
}

// Imbalance is how unevenly the ranks computed.
type Imbalance struct {
	AppCV      float64 `json:"app_cv"`  // coefficient of variation of App over ranks
	CommCV     float64 `json:"comm_cv"` // and of Comm
	MostLoaded int     `json:"most_loaded_rank"`
	MaxApp     int64   `json:"max_app_ns"`
	MeanApp    int64   `json:"mean_app_ns"`
}

// POP holds the POP Centre of Excellence's efficiencies.
type POP struct {
	LoadBalance        float64 `json:"load_balance"`             // mean App / max App
	CommEfficiency     float64 `json:"communication_efficiency"` // max App / max Wall
	ParallelEfficiency float64 `json:"parallel_efficiency"`      // their product
}

// LateSender is the time receives waited for messages not yet sent.
type LateSender struct {
	Total int64      `json:"total_ns"`
	Count int        `json:"count"`
	Pairs []LatePair `json:"pairs"` // worst first
}

// LatePair is the late sends from one rank to another.
type LatePair struct {
	Sender   int   `json:"sender"`
	Receiver int   `json:"receiver"`
	Count    int   `json:"count"`
	Total    int64 `json:"total_ns"`
	Max      int64 `json:"max_ns"`
}

// CollectiveWait is the time ranks waited inside collectives for the last
// member to enter.
type CollectiveWait struct {
	Total     int64       `json:"total_ns"` // summed over ranks
	Instances int         `json:"instances"`
	PerRank   []RankWait  `json:"per_rank"`
	Worst     []SlowEntry `json:"worst"` // instances with the widest spread of entries
}

// RankWait is one rank's waiting at collectives.
type RankWait struct {
	Rank int   `json:"rank"`
	Wait int64 `json:"wait_ns"`
}

// SlowEntry is one collective instance whose members entered far apart.
type SlowEntry struct {
	Op     string `json:"op"`
	Comm   uint32 `json:"comm"`
	Seq    uint64 `json:"seq"`
	Spread int64  `json:"spread_ns"` // last entry less first entry
	Last   int    `json:"last_rank"`
	At     int64  `json:"at_ns"`
}

// Straggler is a rank that entered collectives last.
type Straggler struct {
	Rank  int     `json:"rank"`
	Last  int     `json:"last_count"`
	Share float64 `json:"share"`    // of the instances it belonged to
	Delay int64   `json:"delay_ns"` // summed spread of the instances it was last in
}

// BandwidthStat is the calls of one collective at one size.
type BandwidthStat struct {
	Op        string  `json:"op"`
	Algo      string  `json:"algo"`
	Ranks     int     `json:"ranks"`
	Bytes     int64   `json:"bytes"`
	Calls     int     `json:"calls"`
	Time      int64   `json:"time_ns"` // mean, from the last entry to the last exit
	AlgBW     float64 `json:"algbw_gbs"`
	BusBW     float64 `json:"busbw_gbs"`
	Predicted int64   `json:"predicted_ns,omitempty"` // the cost model's (prims' costs, topo's constants)
	ModelBW   float64 `json:"model_busbw_gbs,omitempty"`
}

// StepBreakdown is where a training step's time went, averaged over ranks
// and steps (regions named "step"), the first of a rank's steps left out
// when it has more (Warmup): Step = Compute + Exposed + Idle, and
// Overlapped is the part of Compute that communication overlapped.
type StepBreakdown struct {
	Steps      int        `json:"steps"`                 // per rank, the most any rank measured
	Warmup     int        `json:"warmup_steps_left_out"` // per rank
	Step       int64      `json:"step_ns"`
	Compute    int64      `json:"compute_ns"`
	Exposed    int64      `json:"exposed_comm_ns"`
	Overlapped int64      `json:"overlapped_comm_ns"`
	Idle       int64      `json:"idle_ns"`
	Hidden     float64    `json:"hidden_share"` // overlapped / (overlapped + exposed)
	PerRank    []StepRank `json:"per_rank"`
}

// StepRank is one rank's mean step.
type StepRank struct {
	Rank       int   `json:"rank"`
	Steps      int   `json:"steps"` // measured
	Step       int64 `json:"step_ns"`
	Compute    int64 `json:"compute_ns"`
	Exposed    int64 `json:"exposed_comm_ns"`
	Overlapped int64 `json:"overlapped_comm_ns"`
	Idle       int64 `json:"idle_ns"`
}

// Analyze reports on j.
func Analyze(j *job.Job) *Report {
	r := &Report{Job: Info{Dir: j.Dir, ID: j.ID, Program: j.Program, Size: j.Size, Missing: j.Missing, Problems: j.Problems, Duration: j.Duration}}
	for _, x := range j.Present() {
		r.Job.Ranks = append(r.Job.Ranks, x.Rank)
		r.Job.Events += len(x.Events)
	}
	if n := j.EarlierNote(); n != "" {
		r.Job.Notes = append(r.Job.Notes, n)
	}
	r.Job.Restart, r.Job.Earlier = j.Restart, j.Earlier
	r.ranks(j)
	left := r.partial(j)
	r.ops(j)
	r.regions(j, left)
	r.balance(left)
	r.lateSenders(j)
	colls := j.Collectives()
	r.collectiveWaits(j, colls)
	r.bandwidth(j, colls, left)
	r.steps(j)
	r.pipeline(j)
	return r
}

// blocking reports whether the rank waited inside e: a blocking send,
// receive or collective, or a wait.
func blocking(e *trace.Event) bool {
	switch e.Kind {
	case trace.SendEvent, trace.RecvEvent, trace.CollectiveEvent:
		return e.Flags&trace.NonBlocking == 0
	case trace.WaitEvent:
		return true
	}
	return false
}

// IsComm reports whether e is communication: a send, receive, wait or
// collective.
func IsComm(e *trace.Event) bool {
	switch e.Kind {
	case trace.SendEvent, trace.RecvEvent, trace.CollectiveEvent, trace.WaitEvent:
		return true
	}
	return false
}

// OpName is the operation an event was: MPI-style names (send, recv,
// wait, allreduce, barrier, ...), with an i for the non-blocking ones.
func OpName(j *job.Job, e *trace.Event) string {
	var n string
	switch e.Kind {
	case trace.SendEvent:
		n = "send"
	case trace.RecvEvent:
		n = "recv"
	case trace.WaitEvent:
		return "wait"
	case trace.CollectiveEvent:
		n = j.Str(e.Name)
	default:
		return e.Kind.String()
	}
	if e.Flags&trace.NonBlocking != 0 {
		return "i" + n
	}
	return n
}
