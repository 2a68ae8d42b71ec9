package main

import (
	"context"
	"log"
	"strings"

	"github.com/gorun-hpc/gorun/net/gossip"
	"github.com/gorun-hpc/gorun/spmd/launch"
)

// openSeed opens the job's gossip seed with net/gossip.
func openSeed(ctx context.Context, cfg launch.SeedConfig) (launch.Seed, error) {
	gc := gossip.Config{JobID: cfg.JobID, Secret: cfg.Secret, BindAddr: cfg.BindAddr, Crowd: cfg.Crowd}
	if cfg.Verbose {
		gc.Logger = log.New(logWriter(cfg.Logf), "", 0)
	}
	var s *gossip.Seed
	err := cfg.Ports.Try(func(port int) (err error) {
		gc.BindPort = port
		s, err = gossip.OpenSeed(gc)
		return err
	})
	if err != nil {
		return nil, err
	}
	return seed{s}, nil
}

// seed adapts *gossip.Seed to launch.Seed.
type seed struct{ *gossip.Seed }

func (s seed) Wait(ctx context.Context, size int) error {
	_, err := s.Seed.Wait(ctx, size)
	return err
}

var _ launch.Seed = seed{}

// logWriter turns log.Logger output into gorun log lines.
type logWriter func(format string, args ...any)

func (w logWriter) Write(p []byte) (int, error) {
	w("%s", strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
