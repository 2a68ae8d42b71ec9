package main

import (
	"fmt"
	"io"

	"github.com/urfave/cli/v2"

	"github.com/gorun-hpc/gorun/cmd/goprof/internal/render"
	"github.com/gorun-hpc/gorun/cmd/goprof/internal/report"
)

func timelineCommand() *cli.Command {
	return &cli.Command{
		Name:      "timeline",
		Usage:     "write the job as Chrome trace event JSON, which Perfetto (ui.perfetto.dev) and chrome://tracing open",
		ArgsUsage: "DIR",
		Flags:     append(narrowFlags(), outputFlag("trace.json")),
		Action: func(cliCtx *cli.Context) error {
			j, err := loadJob(cliCtx, cliCtx.App.ErrWriter)
			if err != nil {
				return err
			}
			return output(cliCtx, func(w io.Writer) error { return render.Timeline(w, j) })
		},
	}
}

func svgCommand() *cli.Command {
	return &cli.Command{
		Name:      "svg",
		Usage:     "draw the job's timeline as an SVG picture: ranks down, time across",
		ArgsUsage: "DIR",
		Flags: append(narrowFlags(), outputFlag("timeline.svg"),
			&cli.IntFlag{Name: flagWidth, Value: 1400, Usage: "the picture's width in `PIXELS`"}),
		Action: func(cliCtx *cli.Context) error {
			j, err := loadJob(cliCtx, cliCtx.App.ErrWriter)
			if err != nil {
				return err
			}
			if wd := cliCtx.Int(flagWidth); wd < 200 || wd > 100000 {
				return usageError{fmt.Errorf("--width %d: want 200 to 100000 pixels", wd)}
			}
			opt := render.SVGOptions{Width: cliCtx.Int(flagWidth), Title: j.Dir}
			return output(cliCtx, func(w io.Writer) error { return render.SVG(w, j, opt) })
		},
	}
}

func htmlCommand() *cli.Command {
	return &cli.Command{
		Name:      "html",
		Usage:     "write the report, the timeline and charts as one self-contained web page",
		ArgsUsage: "DIR",
		Flags:     append(narrowFlags(), outputFlag("report.html")),
		Action: func(cliCtx *cli.Context) error {
			j, err := loadJob(cliCtx, nil) // the page lists the problems
			if err != nil {
				return err
			}
			r := report.Analyze(j)
			return output(cliCtx, func(w io.Writer) error { return render.HTML(w, j, r) })
		},
	}
}
