package workload

import (
	"fmt"

	"github.com/gorun-hpc/gorun/compress"
)

// OneReplica is why a --compress codec has nothing to do in a job of one
// data-parallel replica (CompressionReport's idle): no gradients cross
// ranks, so they stay exact and nothing is sent.
const OneReplica = "one data-parallel replica, no gradients to exchange"

// CompressionReport is what a training example prints at its end about
// its --compress codec over steps steps (1 or more): "compression NAME
// sent B bytes a step of R (ratio X)", then a warning line if the codec
// turned finite values into infinities; or, where idle says why the codec
// had nothing to do (OneReplica, say), "compression NAME had nothing to
// do (IDLE): the gradients stayed exact".
func CompressionReport(codec compress.Codec, st compress.Stats, steps int, idle string) string {
	if idle != "" {
		return fmt.Sprintf("compression %s had nothing to do (%s): the gradients stayed exact", codec.Name(), idle)
	}
	n := int64(steps)
	s := fmt.Sprintf("compression %s sent %d bytes a step of %d (ratio %.1f)", codec.Name(), st.Sent/n, st.Raw/n, st.Ratio())
	if st.Saturated > 0 {
		s += fmt.Sprintf("\nwarning: %s turned %d finite gradient values into ±Inf (they overflowed its range): scale the loss down, or use bf16", codec.Name(), st.Saturated)
	}
	return s
}

// IdleCodec is what a resume note about codec state adds where this
// run's --compress codec has nothing to do (idle, as CompressionReport
// takes it), so that the note does not read as if --compress were not
// given: " (it has nothing to do: IDLE)"; "" for a codec at work.
func IdleCodec(idle string) string {
	if idle == "" {
		return ""
	}
	return " (it has nothing to do: " + idle + ")"
}
