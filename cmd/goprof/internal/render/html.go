package render

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/gorun-hpc/gorun/cmd/goprof/internal/job"
	"github.com/gorun-hpc/gorun/cmd/goprof/internal/report"
)

// HTML writes one self-contained web page about j and its analysis r: no
// scripts and nothing fetched, the styles and pictures inline. It shows
// the job and, prominently, what is wrong with its traces (missing ranks,
// damaged files); the timeline (SVG's picture, in the section
// id="timeline-section"); bar charts of each rank's application and
// communication time, of the ten operations that took the most time and,
// for a training job, of the step breakdown; then the report's tables.
func HTML(w io.Writer, j *job.Job, r *report.Report) error {
	m := newMarkup(w)
	m.raw("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\"/>\n<title>")
	m.text("goprof: " + j.Dir)
	m.raw("</title>\n<style>\n" + pageStyle + "</style>\n</head>\n<body>\n<header>\n<h1>")
	m.text("goprof report: " + j.Dir)
	m.raw("</h1>\n</header>\n")
	jobInfo(m, j, r)
	problems(m, j, r)
	m.raw("<section id=\"timeline-section\">\n<h2>Timeline</h2>\n<div class=\"picture\">\n")
	if m.err == nil {
		m.err = SVG(m.w, j, SVGOptions{Title: "Timeline: " + j.Dir})
	}
	m.raw("</div>\n</section>\n")
	charts(m, r)
	ranksTable(m, r)
	opsTable(m, r)
	sitesTable(m, r)
	regionsTable(m, r)
	lateSendersTable(m, r)
	collectiveWaitsTable(m, r)
	stragglersTable(m, r)
	popTable(m, r)
	bandwidthTable(m, r)
	stepsTable(m, r)
	m.raw("</body>\n</html>\n")
	if err := m.flush(); err != nil {
		return fmt.Errorf("writing the HTML report: %w", err)
	}
	return nil
}

// pageStyle is the page's inline style sheet.
const pageStyle = `body { font-family: Helvetica, Arial, sans-serif; margin: 16px 24px; color: #212121; background: #ffffff; }
h1 { font-size: 22px; margin: 0 0 8px; }
h2 { font-size: 17px; margin: 28px 0 8px; padding-bottom: 4px; border-bottom: 1px solid #e0e0e0; }
h3 { font-size: 14px; margin: 16px 0 6px; }
dl.info { display: grid; grid-template-columns: max-content auto; gap: 2px 14px; font-size: 13px; margin: 0; }
dl.info dt { color: #616161; }
dl.info dd { margin: 0; }
.problems { border: 2px solid #e53935; background: #ffebee; padding: 4px 16px 8px; margin: 12px 0; border-radius: 4px; }
.problems h2 { color: #b71c1c; border: none; margin: 6px 0; }
.problems li { margin: 3px 0; font-size: 13px; }
.missing-ranks { font-weight: bold; color: #b71c1c; }
.picture { overflow-x: auto; }
.picture svg { display: block; max-width: 100%; height: auto; }
.chart { display: block; margin: 8px 0 16px; max-width: 100%; height: auto; }
table { border-collapse: collapse; font-size: 12px; margin: 6px 0 12px; }
th, td { border: 1px solid #e0e0e0; padding: 3px 8px; text-align: right; white-space: nowrap; }
th { background: #f5f5f5; }
th.l, td.l { text-align: left; }
.note { color: #616161; font-size: 12px; margin: 4px 0; }
`

// jobInfo lists what the job was.
func jobInfo(m *markup, j *job.Job, r *report.Report) {
	var hosts []string
	for _, x := range j.Present() {
		if !slices.Contains(hosts, x.Host) {
			hosts = append(hosts, x.Host)
		}
	}
	m.raw("<section id=\"job\">\n<dl class=\"info\">\n")
	item := func(k, v string) {
		m.raw("<dt>")
		m.text(k)
		m.raw("</dt><dd>")
		m.text(v)
		m.raw("</dd>\n")
	}
	item("directory", j.Dir)
	if j.Program != "" {
		item("program", j.Program)
	}
	if j.ID != "" {
		item("job", j.ID)
	}
	ranks := fmt.Sprintf("%d", j.Size)
	if len(r.Job.Ranks) != j.Size {
		ranks += fmt.Sprintf(" (traces of %s)", job.Ranges(r.Job.Ranks))
	}
	item("ranks", ranks)
	shown := hosts
	if len(shown) > 16 {
		shown = append(slices.Clip(shown[:16]), "…")
	}
	item("hosts", fmt.Sprintf("%d: %s", len(hosts), strings.Join(shown, ", ")))
	item("duration", dur(r.Job.Duration))
	item("events", fmt.Sprintf("%d", r.Job.Events))
	m.raw("</dl>\n</section>\n")
}

// problems lists, in a box at the top, the missing ranks and what is
// wrong with the trace files.
func problems(m *markup, j *job.Job, r *report.Report) {
	var incomplete []int
	for _, s := range r.Ranks {
		if !s.Complete {
			incomplete = append(incomplete, s.Rank)
		}
	}
	if len(j.Missing) == 0 && len(r.Job.Problems) == 0 && len(incomplete) == 0 && len(r.Job.Notes) == 0 {
		return
	}
	m.raw("<section id=\"problems\" class=\"problems\">\n<h2>Problems</h2>\n")
	if len(j.Missing) > 0 {
		m.raw(`<p class="missing-ranks">`)
		word := "rank"
		if len(j.Missing) > 1 {
			word = "ranks"
		}
		m.text(fmt.Sprintf("Missing %s: %s of %d. Their trace files are absent or unusable; the results leave them out.", word, job.Ranges(j.Missing), j.Size))
		m.raw("</p>\n")
	}
	if len(incomplete) > 0 {
		m.raw("<p>")
		m.text(fmt.Sprintf("The traces of rank %s end early (the rank crashed, was killed or is still running): their last events are missing.", job.Ranges(incomplete)))
		m.raw("</p>\n")
	}
	if len(r.Job.Problems) > 0 {
		m.raw("<ul>\n")
		for _, p := range r.Job.Problems {
			m.raw("<li>")
			m.text(p)
			m.raw("</li>\n")
		}
		m.raw("</ul>\n")
	}
	for _, n := range r.Job.Notes {
		m.raw("<p class=\"note\">")
		m.text(n)
		m.raw("</p>\n")
	}
	m.raw("</section>\n")
}

// charts draws the bar charts: time per rank, per operation, and the
// training step.
func charts(m *markup, r *report.Report) {
	m.raw("<section id=\"charts\">\n<h2>Where the time went</h2>\n")
	var bars []bar
	for _, s := range r.Ranks {
		bars = append(bars, bar{label: fmt.Sprintf("rank %d", s.Rank), values: []int64{s.App, s.Comm},
			note: fmt.Sprintf("%s comm (%s)", dur(s.Comm), pct(s.CommShare))})
	}
	barChart(m, "chart-ranks", "Time per rank: application and communication",
		[]series{{"application", appColor}, {"communication (blocking)", commColor}}, bars, dur)

	bars = nil
	for i, s := range r.Ops {
		if i == 10 {
			break
		}
		bars = append(bars, bar{label: s.Op, values: []int64{s.Total}, note: fmt.Sprintf("%s in %d calls", dur(s.Total), s.Count)})
	}
	if len(bars) > 0 {
		barChart(m, "chart-ops", "Time per operation, all ranks (the ten longest)", []series{{"total time", opBarColor}}, bars, dur)
	}

	if s := r.Steps; s != nil {
		// Overlapped communication happens during computation: the bar
		// splits the computation, so that its parts add up to the step.
		ss := []series{{"compute", computeColor}, {"compute with comm overlapped", overlappedColor}, {"exposed comm", exposedColor}, {"idle", idleColor}}
		parts := func(compute, overlapped, exposed, idle int64) []int64 {
			return []int64{compute - overlapped, overlapped, exposed, idle}
		}
		bars = []bar{{label: "mean", values: parts(s.Compute, s.Overlapped, s.Exposed, s.Idle), note: "step " + dur(s.Step)}}
		if len(s.PerRank) > 1 {
			for _, x := range s.PerRank {
				bars = append(bars, bar{label: fmt.Sprintf("rank %d", x.Rank), values: parts(x.Compute, x.Overlapped, x.Exposed, x.Idle), note: "step " + dur(x.Step)})
			}
		}
		barChart(m, "chart-steps", fmt.Sprintf("Training step breakdown (%d steps per rank; %s of the communication hidden)", s.Steps, pct(s.Hidden)), ss, bars, dur)
	}
	m.raw("</section>\n")
}
