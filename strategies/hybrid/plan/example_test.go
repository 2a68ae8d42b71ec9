package plan_test

import (
	"fmt"
	"os"

	"github.com/gorun-hpc/gorun/strategies/hybrid/plan"
	"github.com/gorun-hpc/gorun/strategies/nn"
)

// Example plans GPT-2 small on two hosts of eight ranks with 2 GiB each.
func Example() {
	job := plan.Job{
		Model:        nn.DefaultGPTConfig(),
		Seq:          1024,
		GlobalBatch:  32,
		Ranks:        16,
		RanksPerHost: 8,
		MemPerRank:   2 << 30,
	}
	machine := plan.Machine{
		Flops:     2e11,                     // a GEMM probe's fp32 rate
		AlphaNear: 5e-6, BetaNear: 1 / 10e9, // shared memory
		AlphaFar: 40e-6, BetaFar: 1 / 1.2e9, // 10 GbE
		MemBandwidth: 2e10,
	}
	es, err := plan.Rank(job, machine)
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := plan.Write(os.Stdout, es, 3); err != nil {
		fmt.Println(err)
	}
	best := es[0]
	fmt.Printf("run %v: %.2f s a step, %.1f GiB a rank\n", best.Layout, best.Step, float64(best.Memory)/(1<<30))
	// Output:
	// rank  layout                        step ms   tokens/s  memory   fits  compute   tp       pp     bubble  dp       opt     reasons
	// 1     tp4 pp1 dp4 zero1 m4 1f1b sp  9166.401  3575      2.0 GiB  yes   8749.591  195.118  0.000  0.000   207.204  14.488  compute 95% of step; dp comm 2% of step; dp collectives cross hosts
	// 2     tp4 pp1 dp4 zero1 m8 1f1b sp  9172.761  3572      1.2 GiB  yes   8749.591  201.478  0.000  0.000   207.204  14.488  compute 95% of step; dp comm 2% of step; dp collectives cross hosts
	// 3     tp4 pp1 dp4 zero1 m8 1f1b     9172.761  3572      1.6 GiB  yes   8749.591  201.478  0.000  0.000   207.204  14.488  compute 95% of step; dp comm 2% of step; dp collectives cross hosts
	// first choice: tp4 pp1 dp4 zero1 m4 1f1b sp, 9166.401 ms a step, 3575 tokens/s, 2.0 GiB a rank: compute 95% of step; dp comm 2% of step; dp collectives cross hosts
	// run tp4 pp1 dp4 zero1 m4 1f1b sp: 9.17 s a step, 2.0 GiB a rank
}
