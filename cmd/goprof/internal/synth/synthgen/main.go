// Command synthgen writes a synthetic gorun --profile job of a training
// program, for goprof's benchmarks (bench/profile.sh):
//
//	go run ./cmd/goprof/internal/synth/synthgen -o DIR -ranks 8 -events 1000000
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/gorun-hpc/gorun/cmd/goprof/internal/synth"
)

func main() {
	dir := flag.String("o", "", "the job's directory (created)")
	ranks := flag.Int("ranks", 8, "ranks")
	events := flag.Int("events", 1000000, "about how many events, all ranks together")
	flag.Parse()
	if *dir == "" || *ranks < 1 || *events < 1 {
		fmt.Fprintln(os.Stderr, "synthgen: usage: synthgen -o DIR [-ranks N] [-events N]")
		os.Exit(2)
	}
	j, err := synth.New(*dir, *ranks, synth.Options{Program: "synthgen training"})
	if err != nil {
		fmt.Fprintln(os.Stderr, "synthgen:", err)
		os.Exit(1)
	}
	j.Training(*events)
	if err := j.Close(); err != nil {
		fmt.Fprintln(os.Stderr, "synthgen:", err)
		os.Exit(1)
	}
}
