package workload

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"hash/fnv"
	"strings"

	"github.com/gorun-hpc/gorun/prims"
	"github.com/gorun-hpc/gorun/spmd"
)

// FlagValues lists every flag defined on fs, parsed, as "--name=value"
// (its value as the flag prints it, so "0.10" and "0.1" are alike),
// sorted by name: what AgreeFlags compares. A program records it when it
// parses its flags.
func FlagValues(fs *flag.FlagSet) []string {
	var kv []string
	fs.VisitAll(func(f *flag.Flag) { kv = append(kv, "--"+f.Name+"="+f.Value.String()) })
	return kv
}

// AgreeFlags checks that every rank of c runs the program called name
// with the same flags (FlagValues), as examples/ps's ranks check theirs:
// an MPMD job whose programs differ (gorun -np 1 ./examples/zero --zero 3
// : -np 1 ./examples/zero --zero 1) would otherwise make collectives that
// do not match, and hang. Every rank gives a hash and gets everyone's; on
// a difference every rank returns the same error, naming the first rank
// that differs from rank 0 and the first flag that does. Every rank of c
// calls it, before its first other collective on c.
func AgreeFlags(ctx context.Context, c *spmd.Comm, name string, flags []string) error {
	if c.Size() == 1 {
		return nil
	}
	mine := strings.Join(append([]string{"program=" + name}, flags...), "\n")
	h := fnv.New64a()
	h.Write([]byte(mine))
	all := make([]uint64, c.Size())
	if err := prims.AllGather(ctx, c, []uint64{h.Sum64()}, all); err != nil {
		return fmt.Errorf("comparing the ranks' flags: %w", err)
	}
	for r := 1; r < c.Size(); r++ {
		if all[r] != all[0] {
			return disagreement(ctx, c, mine, r)
		}
	}
	return nil
}

// disagreement says how rank r's program and flags, the first that
// differ from rank 0's, differ from them; every rank calls it, and each
// gets both ranks' lists.
func disagreement(ctx context.Context, c *spmd.Comm, mine string, r int) error {
	first, err := BroadcastString(ctx, c, mine, 0)
	if err != nil {
		return fmt.Errorf("the flags of rank %d differ from rank 0's: give every rank of the job the same flags (comparing them: %w)", r, err)
	}
	other, err := BroadcastString(ctx, c, mine, r)
	if err != nil {
		return fmt.Errorf("the flags of rank %d differ from rank 0's: give every rank of the job the same flags (comparing them: %w)", r, err)
	}
	a, b := strings.Split(first, "\n"), strings.Split(other, "\n")
	if a[0] != b[0] {
		return saidBy0(c, fmt.Errorf("rank %d runs %s but rank 0 %s: run one program, with the same flags, on every rank of the job",
			r, strings.TrimPrefix(b[0], "program="), strings.TrimPrefix(a[0], "program=")))
	}
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return saidBy0(c, fmt.Errorf("rank %d runs with %s but rank 0 with %s: give every rank of the job the same flags", r, b[i], a[i]))
		}
	}
	return saidBy0(c, fmt.Errorf("the flags of rank %d differ from rank 0's: give every rank of the job the same flags", r))
}

// saidBy0 is err, which every rank of c has found alike from what they
// shared, as rank 0 returns it and as the others do: under Main only rank
// 0 says it (heard; see RootSays), not every rank the same line.
func saidBy0(c *spmd.Comm, err error) error {
	if c.Rank() != 0 {
		return heard{err}
	}
	return err
}

// broadcastString sends root's s to every rank; each passes its own s.
func BroadcastString(ctx context.Context, c *spmd.Comm, s string, root int) (string, error) {
	n := []int64{int64(len(s))}
	if err := prims.Broadcast(ctx, c, n, root); err != nil {
		return "", err
	}
	b := make([]byte, n[0])
	if c.Rank() == root {
		copy(b, s)
	}
	if err := prims.Broadcast(ctx, c, b, root); err != nil {
		return "", err
	}
	return string(b), nil
}

// RootSays ends, on every rank of c, a part of a run that root alone
// takes (reading a checkpoint), with root's error err (the others pass
// theirs, nil): every rank returns root's, so that the others stop with
// its reason rather than at their next collective with a lost peer. Under
// Main only root says it: Close lets the others leave after it, quietly.
func RootSays(ctx context.Context, c *spmd.Comm, err error, root int) error {
	msg := ""
	if c.Rank() == root && err != nil {
		msg = err.Error()
	}
	got, berr := BroadcastString(ctx, c, msg, root)
	switch {
	case c.Rank() == root && err != nil:
		return err
	case berr != nil:
		return berr
	case got != "":
		return heard{errors.New(got)}
	}
	return nil
}
