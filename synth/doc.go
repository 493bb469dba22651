// Package synth writes collective algorithms for a machine: given a
// topology (package topo), it packs spanning trees for every rank's
// shard over the machine's links, as ForestColl does, and writes them as
// a readable .star program (loops over ranks and trees, named helpers, a
// header with the trees and the predicted busbw) for allgather,
// reducescatter or allreduce (reduce-scatter trees, then the same trees
// back down).
//
// Start with Synthesize: it packs the trees (Pack: multiplicative
// weights over the links with a minimum-cost arborescence per shard,
// rounded to whole chunks), chooses the chunk count, the instances and
// the pipeline unit of each message-size range by the cost model on the
// topology (model.Options.Network, built by Network), and verifies every
// program before returning it: evaluated, checked as `mscclgo check`
// does, run on the CPU backend at several sizes with race detection, and
// modelled. A failure there wraps ErrSynth: it is a bug of synth. Both
// forms of program, one node (gen.go) and several (hier.go), share one
// template of helpers and program() (template.go).
// BoundTime is the cut lower bound the programs are measured against.
//
// docs/synthesis.md describes the method, its limits and how to read a
// synthesized program.
package synth
