// Package topo knows where the ranks of a job sit and what talking between
// them costs, and chooses the collective algorithm for each call.
//
// Detect groups the ranks of a communicator by host (the HostID the
// rendezvous reported for each). Probe measures, once per job, the latency
// and bandwidth of the two link classes (ranks on the same host, ranks on
// different hosts) and the speed of a reduction, and fits the
// alpha-beta-gamma Model; rank 0's constants are broadcast so that every
// rank decides alike. Choose returns, per collective and message size, the
// algorithm with the lowest modelled cost, unless GORUN_ALGO forces one.
// Report prints what gorun --topo shows.
//
// topo does not import package prims: prims asks topo which algorithm to
// run, and topo's probes use only point-to-point messages.
package topo
