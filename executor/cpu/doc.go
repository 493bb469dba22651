// Package cpu is the CPU reference backend of mscclgo, the oracle every
// other backend is checked against: it runs an instantiated MSCCL++
// execution plan (an executor.Instance) for all ranks in one process on
// real data, with the device semantics of docs/semantics.md §2-§4, and
// reports deadlocks and data races instead of hanging or silently
// corrupting data. New returns the backend; open a session on an instance
// and launch it on the ranks' buffers:
//
//	sess, err := cpu.New().Open(inst, executor.Options{DType: executor.Float16, Race: true})
//	...
//	err = sess.Launch(ctx, bufs)
//
// OpenRank runs one rank of a job started as one process per rank (on
// package rankwire's World), and Record gives the logical timeline of one
// launch. Open and Launch check an instance and a launch's buffers with
// executor.Validate and executor.CheckOperands, as every backend does.
//
// Model. Every thread block of every rank is one goroutine that executes
// its ops in order, each op as one atomic step "by the whole block"
// (docs/semantics.md §6.3): ops whose memory conflicts (only in racy plans)
// never overlap in time. Data ops work in bulk (copy, DType.Add over
// blocks); LL packets are stored with their real byte layout in the
// session's scratch with 8-byte atomic words, so readers can poll them
// safely. Port channels are served by one proxy goroutine per rank that
// processes the rank's FIFO in push order. Every blocking wait (channel
// wait, semaphore, barrier, packet flag, flush) parks the goroutine on a
// condition variable of the session monitor; when every unfinished thread
// block is parked and no proxy has work, the launch stops with an
// *executor.DeadlockError. With Options.Race, vector clocks and a shadow
// memory of byte intervals find conflicting accesses that no happens-before
// edge orders (*executor.RaceError). A deadlock, a cancellation or an op
// error leaves the session unusable (as a hung GPU would be); a race report
// does not. Provenance re-runs a launch with a movement log that explains
// a wrong element (Prov.Explain) and names its likely causes as
// executor/diagnose values (Prov.Causes); a deadlock's are named by
// diagnose.Deadlock from the DeadlockError alone.
//
// Limits of the model: launches run in lock-step on all ranks, so a
// hazard between one rank's launch f+1 and a peer's launch f (what double
// buffering guards against) gives no wrong data here; with Options.Race
// the detector, whose history spans launches, reports it (a race across
// the launch boundary, docs/executor.md §5.3); the thread-level schedule
// inside a block (missing nops) is not checked, as a block executes each op
// as one unit; and a racy plan that writes raw data over packets that
// another block polls still races at the Go level (polling takes no locks).
//
// Semantic choices where the reference is ambiguous or quirky
// (docs/semantics.md §6.2): flush works (Q1), get uses its own offsets
// (Q2), every put source uses its own buffer (Q6), copies and reduce tails
// cover every byte (Q4), Q8 is mirrored (the scratch offset of double
// buffering applies to local scratch and to packet accesses, not to
// non-packet remote or NVLS accesses, nor to the local source of a port
// put, which the proxy reads from the buffer's base), pipeline lengths
// clamp at zero (Q9). Relaxed signal and wait are as strong as the
// non-relaxed ones (docs/semantics.md §2.9, item 3). glres sums the
// members' buffers in ascending rank order, ((m0 ⊕ m1) ⊕ m2)…; the switch
// hardware uses its own order, so GPU results may differ in the last bits.
package cpu
