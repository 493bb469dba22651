// Package plan is the MSCCL++ JSON execution plan format, which the
// compiler (package emit) writes and the executor (package executor)
// reads, the way go/ast, go/parser and go/printer are one family:
//
//   - the vocabulary: the buffer types, channel types and op types with
//     their plan spellings, the JSON keys (keys.go), the values of
//     "collective", the MSCCL++ executor's limits and the "alltoallv"
//     extension's constants;
//   - the op table (Ops, ops.go), the one owner of what each op is: its
//     family, operand roles, packets, channels, proxy use and fusion
//     facts, asked through the methods of OpType;
//   - the document types (Plan, GPU, ThreadBlock, Op, Operand), a
//     faithful, validated image of the JSON;
//   - the reader and format validation: Load parses and validates any
//     plan, made by mscclgo or by MSCCL++, naming the first problem as a
//     *PlanError; Check lists them all (for mscclgo check);
//   - the encoder: Encode writes a Plan byte for byte as the Python DSL
//     prints it (emit.Lower makes the Plan of a compiled program), through
//     the Writer; a plan read by Load (or ReadCompiled, which also takes
//     the compiler's glre) is written back as it was;
//   - the source map that relates a plan's ops to the .star lines that
//     recorded them.
//
// It is the one place a spelling is defined and imports no other package
// of mscclgo. Reading a plan file with the process's limits
// (executor.LoadFile) and running a plan are package executor's.
//
// Spellings go both ways: String gives the plan's spelling and a Parse
// function reads it back.
//
//	bt, ok := plan.ParseBufferType("s") // plan.Scratch, true
//	op, ok := plan.ParseOpType("rres")  // plan.OpReadReduceSend, true
//	fmt.Println(bt, bt.Name(), op)      // s scratch rres
//
// The format is described in docs/plan-format.md, the reader and the
// source map in docs/executor.md.
package plan
