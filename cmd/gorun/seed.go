package main

import (
	"context"
	"errors"
	"log"
	"net"
	"strconv"
	"strings"

	"github.com/gorun-hpc/gorun/net/gossip"
	"github.com/gorun-hpc/gorun/net/rendezvous"
	"github.com/gorun-hpc/gorun/spmd/launch"
)

// openSeed opens the job's rendezvous (net/rendezvous) and, with
// cfg.Gossip, its gossip seed (net/gossip), both on cfg's address and
// ports.
func openSeed(ctx context.Context, cfg launch.SeedConfig) (launch.Seed, error) {
	gc := gossip.Config{JobID: cfg.JobID, Secret: cfg.Secret, BindAddr: cfg.BindAddr, Crowd: cfg.Crowd}
	var logger *log.Logger
	if cfg.Verbose {
		logger = log.New(logWriter(cfg.Logf), "", 0)
		gc.Logger = logger
	}
	var ln net.Listener
	err := cfg.Ports.Try(func(port int) (err error) {
		ln, err = net.Listen("tcp", net.JoinHostPort(cfg.BindAddr, strconv.Itoa(port)))
		return err
	})
	if err != nil {
		return nil, err
	}
	rv := rendezvous.Listen(ln, cfg.JobID, cfg.Secret, logger)
	if !cfg.Gossip {
		return seed{rv: rv}, nil
	}
	var s *gossip.Seed
	err = cfg.Ports.Try(func(port int) (err error) {
		gc.BindPort = port
		s, err = gossip.OpenSeed(gc)
		return err
	})
	if err != nil {
		rv.Close()
		return nil, err
	}
	return seed{gs: s, rv: rv}, nil
}

// seed adapts the rendezvous and *gossip.Seed (nil for a job on one
// machine) to launch.Seed.
type seed struct {
	gs *gossip.Seed
	rv *rendezvous.Server
}

func (s seed) Addr() string {
	if s.gs == nil {
		return ""
	}
	return s.gs.Addr()
}

func (s seed) Rendezvous() string { return s.rv.Addr() }

// Wait waits for every rank to register with the rendezvous, which every
// rank does (the gossip sees only the ranks of jobs across hosts).
func (s seed) Wait(ctx context.Context, size int) error {
	_, err := s.rv.Wait(ctx)
	return err
}

func (s seed) Watch(ctx context.Context) ([]int, error) { return s.rv.Watch(ctx) }

func (s seed) Close() error {
	err := s.rv.Close()
	if s.gs != nil {
		err = errors.Join(err, s.gs.Close())
	}
	return err
}

var _ launch.Seed = seed{}

// logWriter turns log.Logger output into gorun log lines.
type logWriter func(format string, args ...any)

func (w logWriter) Write(p []byte) (int, error) {
	w("%s", strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
