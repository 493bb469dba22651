// Package gpu is the host runtime of mscclgo's GPU backend: it runs
// instantiated plans on the plan interpreter kernel of csrc/ through a
// Driver, the seam between the runtime and a device. A Config names the
// backend and the driver each session opens; programs make it, every
// field, with runconfig.Settings.GPUConfig. There are three
// entries, each a session kind in a file of its own:
//
//   - New (backend.go) is an executor.Backend: Open returns a session
//     (session.go) that runs every rank of a plan on one device, or, with
//     several devices, a localSession (local.go) of one rank session per
//     device connected in-process (hub.go);
//   - OpenRank (rank.go) runs one rank of a job started as one process per
//     rank (mpirun, torchrun), connected through a rankwire.World;
//   - OpenStreamSession (streamsession.go) returns a StreamSession, a rank
//     session on the caller's device buffers and stream: the seam of the
//     communicator the NCCL library (package nccl) drives, package
//     gpu/devcomm, which opens or reuses one per plan instance.
//
// For example, with the emulated driver:
//
//	b := gpu.New(gpu.Config{Name: "gpu-emu", Open: emu.Open})
//	sess, err := b.Open(inst, opts) // then sess.Launch, as with any executor.Backend
//
// A session encodes the instance into the kernel's tables (layout.go, the
// Go mirror of csrc/mscclgo/layout.h), keeps the persistent device state
// (scratch, channel counters, semaphores, barriers, port-channel FIFOs),
// and runs each launch (run.go) with one proxy goroutine per rank with
// port channels and a watchdog that turns a launch without progress into
// an *executor.DeadlockError.
//
// Drivers: gpu/emu runs the g++-built kernel on host threads (cgo);
// gpu/cuda runs the nvcc-built kernel on an NVIDIA GPU through
// gorgonia.org/cu (build tag cuda). gpu/gputest compares a backend with
// the CPU reference backend byte for byte. docs/gpu.md describes the
// design and what is verified where.
package gpu
