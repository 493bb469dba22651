// Package harness runs execution plans and checks their results: it
// chooses what a run's inputs are and what its outputs must hold, runs a
// plan on a backend at one message size or a sweep of them, and returns
// what happened (times, wrong data, races, deadlocks) as values for the
// caller to print. `mscclgo run`, `mscclgo install`'s validation and the
// tests of the backends use it, as can any program that runs plans
// without the command line; package executor below it loads plans, lays
// out their buffers and defines the backends.
//
// Run is the one runner. A Strict run is the shortest way to try a plan:
// it instantiates the plan for one message size, fills the inputs as
// MSCCL++'s executor_test.py does (Fill), launches it (here with race
// detection), compares every launch's outputs with the expected results,
// and returns the first problem as the error:
//
//	plan, err := executor.LoadFile("allreduce.json")
//	...
//	_, err = harness.Run(ctx, harness.Config{
//		Backend: cpu.New(), Plan: plan, Sizes: []uint64{1 << 20},
//		DType: executor.Float16, InPlace: plan.Inplace, Iters: 10,
//		Options: executor.Options{Race: true}, Strict: true,
//	})
//
// Without Strict, Run is the loop of `mscclgo run`: it returns a
// SizeResult per size (the time, the wrong elements with a WrongReport
// that locates the first ones and the ops that write them, the first
// race, a deadlock), or a *BudgetError for a size whose estimated memory
// (EstimateMemory) is above the budget. The same Config, with Rank set,
// runs one rank of a run of one process per rank: the rank's own
// session, and the outcome of every launch exchanged with the other
// ranks over a Group. With Counts set instead of Sizes, it binds an
// alltoallv plan to the counts matrix, bounds its memory and checks
// every byte (`mscclgo run --counts`; ValidateVar). Layout and Checker
// are the data: the reference fill of each rank and iteration, the
// expected results and their tolerance, docs/semantics.md §5.
package harness
