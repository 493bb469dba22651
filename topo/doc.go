// Package topo describes the machine a collective runs on: its GPUs,
// the switches, PCIe bridges, CPUs and NICs between them, and the
// directed links that join them, each with the bandwidth transfers
// achieve on it. It is the input of `mscclgo synth` (package synth) and
// of `mscclgo model --topo`.
//
// Start with Load, which reads a topology file in either of its two forms
// (the text `nvidia-smi topo -m` prints, or the project's JSON schema,
// docs/synthesis.md) or a bundled example by name (Examples), with the
// link speeds of a GPU profile (LoadHW: v100-sxm2, a100-pcie, h100-sxm).
// Replicate puts N copies of a node on a rail network. Topology.Route
// gives the links a transfer from one GPU to another crosses, WriteLinks
// the link table, and AllGatherBound and ReduceScatterBound the cut lower
// bounds, computed with max-flow.
//
// Nothing here is mutable package state: a Topology is built once and
// then only read.
package topo
