// Package render draws a loaded job (package job) and its analysis
// (package report) for people and for trace viewers:
//
//   - Timeline writes Chrome trace event JSON, which Perfetto
//     (ui.perfetto.dev) and chrome://tracing open: a process per rank, a
//     thread per track, a slice per call and region, the heap as a counter
//     and an arrow from every send to its receive. It streams: a job of
//     millions of events is written without being held twice.
//   - SVG draws the timeline as a picture that needs no viewer: ranks
//     down, time across, calls coloured by kind, waiting shaded. Events
//     narrower than half a pixel are merged, so that the picture of a
//     million events stays a few hundred KiB.
//   - HTML writes one self-contained page (no scripts, no external
//     resources): the job and its problems, the SVG timeline, bar charts
//     and the report's tables.
//
// # Palette
//
// The SVG and the page use one fixed palette, so that a colour means the
// same thing in every picture:
//
//   - compute (regions), by nesting depth, darkest outermost: #2e7d32,
//     #43a047, #66bb6a, #81c784, #a5d6a7 (depth 4 and deeper);
//   - collectives, each its own colour: allreduce #1f5fbf, broadcast
//     #7b1fa2, reduce #00897b, allgather #f57c00, reducescatter #afb42b,
//     alltoall #6d4c41, barrier #455a64, gather #c2185b, scatter #5c6bc0;
//     an operation not listed takes a colour from #26c6da, #8d6e63,
//     #d4e157, #ec407a, #7e57c2 by its name;
//   - point to point: send #29b6f6, recv #ffca28, wait (for a
//     non-blocking send or receive) #9e9e9e;
//   - waiting inside a collective for its last member to enter: white
//     hatching over the call's colour;
//   - a receive waiting for a late sender: a translucent red (#e53935)
//     overlay;
//   - a rank without a trace: its lane hatched in grey (#bdbdbd).
//
// The bar charts of the page use colours of their own, so that none is
// read as a call.
package render
