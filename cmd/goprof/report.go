package main

import (
	"encoding/json"
	"io"

	"github.com/urfave/cli/v2"

	"github.com/gorun-hpc/gorun/cmd/goprof/internal/report"
)

func reportCommand() *cli.Command {
	return &cli.Command{
		Name:      "report",
		Usage:     "print where the job's time went: per rank, per operation and call site, wait states, efficiency, bandwidth, training steps, a pipeline's bubble",
		ArgsUsage: "DIR",
		Flags:     append(narrowFlags(), &cli.BoolFlag{Name: flagJSON, Usage: "write the report as JSON, for programs"}, outputFlag("-")),
		Action: func(cliCtx *cli.Context) error {
			j, err := loadJob(cliCtx, nil) // the report lists the problems
			if err != nil {
				return err
			}
			r := report.Analyze(j)
			return output(cliCtx, func(w io.Writer) error {
				if cliCtx.Bool(flagJSON) {
					enc := json.NewEncoder(w)
					enc.SetIndent("", "  ")
					return enc.Encode(r)
				}
				return r.Text(w)
			})
		},
	}
}
