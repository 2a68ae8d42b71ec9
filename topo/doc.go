// Package topo knows where the ranks of a job sit and what talking between
// them costs: it measures the machine and provides the constants and the
// building blocks from which package prims prices its algorithms.
//
// Detect groups the ranks of a communicator by host (the HostID the
// rendezvous reported for each). Probe measures, once per job, the latency
// and bandwidth of the two link classes (ranks on the same host, ranks on
// different hosts), the speed of a reduction and the cost of waking a
// rank on a host with more ranks than cores, and fits the alpha-beta-gamma
// Model; rank 0's constants are broadcast so that every rank decides
// alike, and ModelFor caches them per communicator. The Model's methods
// price a message, a round of messages (Step, Burst) and the adjustments
// of crowded hosts (CrowdedWork, CrowdedWhole) on a Shape of ranks. Each
// algorithm of package prims adds these up beside its own code, and
// prims.Choose picks the cheapest per call. Describe prints what gorun
// --topo says of the machine; prims.Report adds the choices.
//
// topo does not import package prims (prims imports topo): its probes use
// only point-to-point messages, and it times prims/kernel's reduction for
// gamma.
package topo
