package main

import (
	"fmt"
	"io"

	"github.com/urfave/cli/v2"

	"github.com/gorun-hpc/gorun/cmd/goprof/internal/report"
)

func diffCommand() *cli.Command {
	return &cli.Command{
		Name:      "diff",
		Usage:     "print what changed between two runs of a program",
		ArgsUsage: "DIR1 DIR2",
		Flags:     append(narrowFlags(), outputFlag("-")),
		Action: func(cliCtx *cli.Context) error {
			if cliCtx.Args().Len() != 2 {
				return usageError{fmt.Errorf("goprof diff needs two directories, the runs to compare (got %d arguments)", cliCtx.Args().Len())}
			}
			a, err := loadDir(cliCtx, cliCtx.Args().Get(0), cliCtx.App.ErrWriter)
			if err != nil {
				return err
			}
			b, err := loadDir(cliCtx, cliCtx.Args().Get(1), cliCtx.App.ErrWriter)
			if err != nil {
				return err
			}
			ra, rb := report.Analyze(a), report.Analyze(b)
			return output(cliCtx, func(w io.Writer) error { return report.Diff(w, ra, rb) })
		},
	}
}
