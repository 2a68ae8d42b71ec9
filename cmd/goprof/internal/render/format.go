package render

import "github.com/gorun-hpc/gorun/cmd/goprof/internal/report"

// dur and size format durations and byte counts as the report does.
var (
	dur  = report.Dur
	size = report.Size
)
