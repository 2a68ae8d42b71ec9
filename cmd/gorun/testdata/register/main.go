// Command register is a rank as small as a rank can be: it registers with
// the job's rendezvous, as spmd.Init does first, and exits; rank 0 prints
// what the table holds. It imports no runtime, gossip or transport, so
// that hundreds of them start in seconds on two cores.
package main

import (
	"bufio"
	"context"
	"encoding/hex"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/gorun-hpc/gorun/net/rendezvous"
	"github.com/gorun-hpc/gorun/spmd/contract"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "register:", err)
		os.Exit(1)
	}
}

func run() error {
	rank, err := strconv.Atoi(os.Getenv(contract.EnvRank))
	if err != nil {
		return err
	}
	size, err := strconv.Atoi(os.Getenv(contract.EnvSize))
	if err != nil {
		return err
	}
	fd, err := strconv.Atoi(os.Getenv(contract.EnvSecretFD))
	if err != nil {
		return err
	}
	line, err := bufio.NewReader(os.NewFile(uintptr(fd), "secret")).ReadString('\n')
	if err != nil {
		return err
	}
	secret, err := hex.DecodeString(strings.TrimSpace(line))
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	host, _ := os.Hostname()
	recs, err := rendezvous.Register(ctx, os.Getenv(contract.EnvRendezvous), os.Getenv(contract.EnvJobID), secret,
		rendezvous.Record{Rank: rank, HostID: os.Getenv(contract.EnvHostID), Hostname: host, Addr: "127.0.0.1:" + strconv.Itoa(10000+rank), Pid: os.Getpid()},
		size, 2*time.Second)
	if err != nil {
		return err
	}
	if rank == 0 {
		pids := map[int]bool{}
		for i, r := range recs {
			if r.Rank != i || r.Addr != "127.0.0.1:"+strconv.Itoa(10000+i) {
				return fmt.Errorf("record %d is %+v", i, r)
			}
			pids[r.Pid] = true
		}
		fmt.Printf("table of %d ranks, %d pids\n", len(recs), len(pids))
	}
	return nil
}
