// Package devcomm is the communicator of mscclgo's GPU backend: one rank
// of a job (NCCL's ncclComm_t) on a device, in a process of its own or as
// one of several threads of one process (ncclCommInitAll), the way the
// NCCL library (package nccl) drives the GPU runtime (package gpu). Open
// returns a rank's Comm; each Call runs a plan instance on the caller's
// device buffers and stream, and returns once its launch is enqueued.
//
// For example, on every rank, with the emulated device's streams
// (emu.NewStreams, whose drivers launch on a caller's stream) and a
// bootstrap b (package bootstrap):
//
//	ss := emu.NewStreams()
//	cfg := runconfig.Settings{}.GPUConfig(runconfig.Device{Name: "gpu-emu", Open: ss.Open})
//	comm, err := devcomm.Open(ctx, cfg, rankwire.World{Net: b, Host: hosts, Tag: 1000})
//	st, err := ss.New() // the caller's stream
//	err = comm.Enqueue(ctx, devcomm.Call{Key: key, Desc: desc, Open: open, In: in, Out: out, Stream: st})
//	err = comm.Quiet(time.Minute) // then comm.AsyncError, comm.Close
//
// The package owns what the ranks of a communicator say to each other of
// their calls; gpu.StreamSession (gpu/streamsession.go) owns what a
// launch writes on the device:
//
//   - in the steady state (the plan instance's session open) the ranks do
//     not meet: each writes the call's record to its host's mailbox
//     (mailbox.go, shared memory) and queues it for the ranks on other
//     hosts (remote.go: a background sender, one message per remote
//     peer), and the launch waits on the caller's stream, behind a gate,
//     for the peers' records of the same call (steady.go); a mismatch
//     becomes every rank's asynchronous error and the launch is aborted
//     before its kernel starts. The first call of a plan instance and a
//     capture meet over the bootstrap (meet.go: one all-gather of a small
//     record: the call, its buffers, and the handles of buffers new to
//     the peers), so a mismatched call fails on every rank, named;
//   - a rank's buffers are registered with its peers on first use and
//     cached by address range (the allocation that holds them): a peer in
//     another process maps it with the driver's IPC handle once, a peer in
//     this process uses the address as it is (CUDA opens no handle in the
//     process that exported it);
//   - a session per plan instance (sessions.go: a gpu.StreamSession over
//     the caller's buffers) is opened at the first call that needs it and
//     kept (at most gpu.Config.MaxSessions: opening one more closes the
//     least recently called one, on every rank): tables, scratch, state
//     block, FIFO, its proxy and its share of the job-wide deadlock watch;
//   - the launch (rank table, arguments, kernel) is enqueued on the
//     caller's stream and the call returns; the instance's serving
//     goroutine (serve.go: one per instance, launches handed over as
//     reused records, nothing made per call) serves the kernel's port
//     channels and has it watched until it ends. A held launch is
//     released by the communicator's gate server (gates.go). A failure or
//     a deadlock becomes the communicator's asynchronous error, and Abort
//     ends a hung launch. The next call of the instance queues its launch
//     behind the running one, not waiting for it (unless the plan has
//     port channels, whose proxy serves one launch at a time);
//   - on a stream being captured into a CUDA graph the same launch is
//     recorded, from images of its arguments and rank table that the
//     graph keeps: each replay copies them and the kernel takes its LL
//     flag from an epoch word in device memory, which every launch
//     advances on the device; replay.go watches the replays. A plan
//     whose launches need the host at run time (port channels, served by
//     the proxy) is refused with ErrNotCapturable before the ranks meet.
//
// docs/gpu.md describes the design and what is verified where.
package devcomm
