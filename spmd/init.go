package spmd

import (
	"bufio"
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"log"
	"os"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/gorun-hpc/gorun/spmd/contract"
)

// Init joins the job this process was started in and returns its World,
// once every rank is known and a barrier across them all has passed.
//
// It reads the launcher's environment (GORUN_RANK and the rest, or
// torchrun's RANK and WORLD_SIZE), opens this rank's data-plane listener,
// joins the gossip with its rank, host and address, and waits for the others
// within GORUN_INIT_TIMEOUT (default 60s); a rank that never arrives fails
// Init on every rank with an error naming it. Without a launcher, Init
// returns a world of one rank. A launched process calls it once: a second
// call fails, also after Close.
func Init(ctx context.Context, opts ...Option) (*World, error) {
	o := collect(opts)
	if !Launched(o.getenv) {
		return singleton(o)
	}
	env, err := ReadEnv(o.getenv)
	if err != nil {
		return nil, fmt.Errorf("spmd.Init: %w", err)
	}
	if env.Verbose && o.logger.Writer() == io.Discard {
		o.logger = log.New(os.Stderr, fmt.Sprintf("gorun: rank %d: ", env.Rank), log.Lmicroseconds)
	}
	if o.ownEnv && joined.Swap(true) {
		return nil, fmt.Errorf("spmd.Init: rank %d: this process has already joined its job: Init runs once per process, as MPI_Init does; use the World the first call returned", env.Rank)
	}
	secret, err := readSecret(o.getenv)
	if err != nil {
		return nil, fmt.Errorf("spmd.Init: rank %d: %w", env.Rank, err)
	}
	w, err := join(ctx, env, secret, o)
	if err != nil {
		return nil, fmt.Errorf("spmd.Init: rank %d of %d: %w", env.Rank, env.Size, err)
	}
	return w, nil
}

// joined is set by the first Init of a launched process: the launcher's
// secret is read once, and a process is one rank of one job.
var joined atomic.Bool

// readSecret reads the per-job secret from the fd gorun passed
// (GORUN_SECRET_FD) or, failing that, GORUN_SECRET.
func readSecret(getenv func(string) string) ([]byte, error) {
	text := getenv(contract.EnvSecret)
	if fdText := getenv(contract.EnvSecretFD); fdText != "" {
		fd, err := strconv.Atoi(fdText)
		if err != nil || fd < 3 {
			return nil, fmt.Errorf("%s=%q: want a file descriptor number >= 3", contract.EnvSecretFD, fdText)
		}
		f := os.NewFile(uintptr(fd), "gorun-secret")
		line, err := bufio.NewReader(f).ReadString('\n')
		f.Close()
		if err != nil && line == "" {
			return nil, fmt.Errorf("reading the job secret from fd %d (%s): %v; was the program started by gorun?", fd, contract.EnvSecretFD, err)
		}
		text = line
	}
	if text == "" {
		return nil, fmt.Errorf("no job secret: neither %s nor %s is set; start the program with gorun", contract.EnvSecretFD, contract.EnvSecret)
	}
	secret, err := hex.DecodeString(strings.TrimSpace(text))
	if err != nil || len(secret) < 16 {
		return nil, fmt.Errorf("the job secret is not at least 16 bytes of hex")
	}
	return secret, nil
}
