// Package hosts reads the host lists a job runs on and maps ranks onto them.
//
// Host lists come from four places, each with its own parser:
//
//   - hostfiles ([ParseHostfile]) in the formats users already have, detected
//     per line: Open MPI ("node1 slots=4 max_slots=8", "user@node2", "count="
//     as a synonym of "slots="), MPICH and Intel MPI ("node1:4") and DeepSpeed
//     ("node1 slots=4"), with "#" comments and blank lines;
//   - the -H flag ([ParseHostList]): "node1:2,node2:2,node3";
//   - a Slurm allocation ([FromSlurm]), from SLURM_JOB_NODELIST in its
//     compressed form ([ParseNodeList]: "n[01-04,07],gpu[1-2]") and
//     SLURM_TASKS_PER_NODE ([ParseTasksPerNode]: "2(x3),1").
//
// A host without a slot count has one slot. A host named twice has the sum of
// its slots, as in Open MPI.
//
// [Map] places ranks on hosts: [BySlot] (the default) fills each host's slots
// before moving to the next, [ByNode] deals ranks round-robin over the hosts.
// Each [Placement] carries what a launcher puts in a rank's environment:
// GORUN_RANK, GORUN_LOCAL_RANK, GORUN_LOCAL_SIZE, GORUN_NODE_RANK and
// GORUN_NODE_COUNT. As with mpirun, asking for zero ranks means one rank per
// slot.
//
// Parsers never panic on bad input and refuse expansions larger than
// [MaxHosts], so a hostile hostfile or environment cannot exhaust memory.
// Their errors say where the input was wrong and what was expected; they
// match [ErrSyntax] with errors.Is and carry a [*ParseError] or
// [*EnvError] for errors.As.
package hosts
