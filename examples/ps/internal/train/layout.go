package train

import (
	"context"
	"fmt"
	"hash/fnv"
	"strings"

	"github.com/gorun-hpc/gorun/examples/internal/workload"
	"github.com/gorun-hpc/gorun/prims"
	"github.com/gorun-hpc/gorun/spmd"
)

// usage is how an MPMD job of the example is started.
const usage = "gorun -np S ./examples/ps/server FLAGS : -np W ./examples/ps/worker FLAGS"

// Layout learns the shape of the job from its ranks: every rank gives its
// role and a hash of its training flags, and gets everyone's. It returns
// the number of servers: in an MPMD job the ranks of role Server, which
// must come first, before at least one worker; in an SPMD job, whose ranks
// all run the program of role ByRank, its --servers. Its error, the same on
// every rank, says what is wrong: the roles out of order, mixed, or the
// training flags not the same everywhere.
func Layout(ctx context.Context, c *spmd.Comm, cfg Config) (servers int, err error) {
	flags := strings.Join(cfg.trainingFlags(), "\n")
	h := fnv.New64a()
	h.Write([]byte(flags))
	all := make([]uint64, 2*c.Size())
	if err := prims.AllGather(ctx, c, []uint64{uint64(cfg.Role), h.Sum64()}, all); err != nil {
		return 0, fmt.Errorf("exchanging roles: %w", err)
	}
	roles := make([]Role, c.Size())
	for r := range roles {
		roles[r] = Role(all[2*r])
	}
	if servers, err = checkRoles(roles, cfg.Servers); err != nil {
		return 0, err
	}
	for r := 1; r < c.Size(); r++ {
		if all[2*r+1] != all[1] {
			return 0, disagreement(ctx, c, flags, roles, r)
		}
	}
	return servers, nil
}

// checkRoles returns the number of servers of a job whose ranks have
// roles, or says what is wrong with them; byRank is --servers, for a job
// of the one program.
func checkRoles(roles []Role, byRank int) (int, error) {
	for r, role := range roles {
		if (role == ByRank) != (roles[0] == ByRank) {
			return 0, fmt.Errorf("rank 0 runs %s and rank %d %s: run either examples/ps on every rank, as in gorun -np N ./examples/ps --servers S, or its server and then its worker, as in %s",
				programOf(roles[0]), r, programOf(role), usage)
		}
	}
	if roles[0] == ByRank {
		if byRank >= len(roles) {
			return 0, fmt.Errorf("--servers %d with %d ranks leaves no worker: pass at most %d", byRank, len(roles), len(roles)-1)
		}
		return byRank, nil
	}
	servers := 0
	for servers < len(roles) && roles[servers] == Server {
		servers++
	}
	for r := servers; r < len(roles); r++ {
		if roles[r] == Server {
			return 0, fmt.Errorf("rank %d is a server after worker rank %d: list the servers first, as in %s", r, servers, usage)
		}
	}
	switch {
	case servers == 0:
		return 0, fmt.Errorf("no server among the job's %s: run the servers first, as in %s", ranks(len(roles)), usage)
	case servers == len(roles):
		return 0, fmt.Errorf("no worker among the job's %s: run workers after the servers, as in %s", ranks(len(roles)), usage)
	}
	return servers, nil
}

// ranks says "1 rank" or "N ranks".
func ranks(n int) string {
	if n == 1 {
		return "1 rank"
	}
	return fmt.Sprintf("%d ranks", n)
}

// programOf names the program of role.
func programOf(role Role) string {
	if role == ByRank {
		return "examples/ps"
	}
	return "the " + role.String() + " (examples/ps/" + role.String() + ")"
}

// disagreement says how the training flags of rank r, the first that
// differs from rank 0's, differ from them; every rank calls it, and each
// gets both ranks' flags.
func disagreement(ctx context.Context, c *spmd.Comm, mine string, roles []Role, r int) error {
	first, err := workload.BroadcastString(ctx, c, mine, 0)
	if err == nil {
		var other string
		other, err = workload.BroadcastString(ctx, c, mine, r)
		if err == nil {
			a, b := strings.Split(first, "\n"), strings.Split(other, "\n")
			for i := range min(len(a), len(b)) {
				if a[i] != b[i] {
					return fmt.Errorf("rank %d (%v) runs with %s but rank 0 (%v) with %s: give every program of the job the same training flags",
						r, roles[r], b[i], roles[0], a[i])
				}
			}
		}
	}
	return fmt.Errorf("the training flags of rank %d (%v) differ from rank 0's (%v): give every program of the job the same training flags",
		r, roles[r], roles[0])
}
