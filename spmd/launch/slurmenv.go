package launch

import (
	"strconv"
	"strings"
)

// The variables srun sets for each task of a step that slurmTaskEnv sets
// for each rank of a job inside a Slurm allocation.
const (
	envSlurmProcID        = "SLURM_PROCID"
	envSlurmLocalID       = "SLURM_LOCALID"
	envSlurmNodeID        = "SLURM_NODEID"
	envSlurmNTasks        = "SLURM_NTASKS"
	envSlurmNProcs        = "SLURM_NPROCS"
	envSlurmNNodes        = "SLURM_NNODES"
	envSlurmNodeList      = "SLURM_NODELIST"
	envSlurmStepNodeList  = "SLURM_STEP_NODELIST"
	envSlurmStepNumNodes  = "SLURM_STEP_NUM_NODES"
	envSlurmStepNumTasks  = "SLURM_STEP_NUM_TASKS"
	envSlurmTasksPerNode  = "SLURM_TASKS_PER_NODE"
	envSlurmStepTasksNode = "SLURM_STEP_TASKS_PER_NODE"
	envSlurmStepID        = "SLURM_STEP_ID" // set inside a step: checkStep reads it
)

// slurmStep is the layout of a job inside a Slurm allocation as srun
// would describe it to a step of the job's ranks: its nodes in node-rank
// order and the ranks of each.
type slurmStep struct {
	nodeList     string // "n1,n2": a host list as Slurm reads it
	tasksPerNode string // "2(x2),1"
	nodes, tasks int
}

// newSlurmStep describes hosts (in node-rank order) with perNode[i] ranks
// on hosts[i].
func newSlurmStep(hosts []string, perNode []int) slurmStep {
	s := slurmStep{nodeList: strings.Join(hosts, ","), tasksPerNode: compressCounts(perNode), nodes: len(hosts)}
	for _, n := range perNode {
		s.tasks += n
	}
	return s
}

// setTask sets in env what srun gives a task of the step: the rank's
// SLURM_PROCID, SLURM_LOCALID and SLURM_NODEID and the step's counts and
// nodes. A rank inherits its agent's, a step of one task on one node, so
// that without them every rank said SLURM_PROCID=0 and SLURM_NTASKS=1 to a
// program that takes its rank from Slurm (PyTorch Lightning, submitit,
// mmcv's slurm launcher).
func (s slurmStep) setTask(env map[string]string, rp rankPlan) {
	env[envSlurmProcID] = strconv.Itoa(rp.Rank)
	env[envSlurmLocalID] = strconv.Itoa(rp.LocalRank)
	env[envSlurmNodeID] = strconv.Itoa(rp.NodeRank)
	for _, k := range []string{envSlurmNTasks, envSlurmNProcs, envSlurmStepNumTasks} {
		env[k] = strconv.Itoa(s.tasks)
	}
	for _, k := range []string{envSlurmNNodes, envSlurmStepNumNodes} {
		env[k] = strconv.Itoa(s.nodes)
	}
	for _, k := range []string{envSlurmNodeList, envSlurmStepNodeList} {
		env[k] = s.nodeList
	}
	for _, k := range []string{envSlurmTasksPerNode, envSlurmStepTasksNode} {
		env[k] = s.tasksPerNode
	}
}

// compressCounts writes counts as Slurm writes SLURM_TASKS_PER_NODE: runs
// of one count as COUNT(xN), "2(x3),1".
func compressCounts(counts []int) string {
	var parts []string
	for i := 0; i < len(counts); {
		j := i
		for j+1 < len(counts) && counts[j+1] == counts[i] {
			j++
		}
		part := strconv.Itoa(counts[i])
		if j > i {
			part += "(x" + strconv.Itoa(j-i+1) + ")"
		}
		parts = append(parts, part)
		i = j + 1
	}
	return strings.Join(parts, ",")
}
