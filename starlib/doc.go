// Package starlib evaluates mscclgo algorithm scripts: Starlark files that
// describe collective-communication algorithms with the builtins of the
// MSCCL++ Python DSL (CollectiveProgram, Rank, MemoryChannel, …). Eval
// runs one script from a Source (DirSource for a directory, FSSource for
// an fs.FS) under the limits of its Options and returns the programs it
// created; each Program holds the recorded ir.Program and computes its
// execution plan on the first call of Plan:
//
//	res, err := starlib.Eval(starlib.DirSource("."), "allgather.star", starlib.Options{})
//	if err != nil {
//		return err // an *Error with the .star position and a traceback
//	}
//	plan, err := res.Programs[0].Plan()
//
// The language is described in docs/language.md, and how evaluation works
// (the builtins, the sandbox, the metered operators and the limits) in
// docs/design.md §2.
package starlib
