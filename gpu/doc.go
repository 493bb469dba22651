// Package gpu is the host runtime of mscclgo's GPU backend: an
// executor.Backend that runs instantiated plans on the plan interpreter
// kernel of csrc/ through a Driver.
//
//   - driver.go: the Driver and HostMem interfaces the runtime needs of a
//     device (memory, copies, host-mapped memory, occupancy, launch, the
//     proxy's copies), and Config.
//   - layout.go: the Go mirror of csrc/mscclgo/layout.h and the encoder of
//     an executor.Instance into the kernel's tables (blocks, ops, regions,
//     ids); the alignment the device needs.
//   - backend.go: New, Open (persistent device state: tables, scratch,
//     channel counters, semaphores, barriers, FIFOs, progress records),
//     Launch (the caller's buffers to and from the device, in-place
//     aliasing kept), Close.
//   - run.go: one launch: arguments, the kernel, one proxy goroutine per
//     rank with port channels, and the watchdog that turns a launch
//     without progress into an *executor.DeadlockError.
//   - rank.go: OpenRank and RankSession, one rank of a job run as one
//     process per rank: its own device state, IPC handles exchanged
//     through the bootstrap, same-host peers' memory in the rank table,
//     the job-wide deadlock watch (cpu.Watch).
//   - wire.go: port traffic to ranks in other processes (the CPU
//     transport's DATA/FLAG/FENCE messages) and its receivers.
//   - reserve_unix.go, reserve_other.go: inaccessible address space that
//     stands for the buffers of ranks in other processes.
//
// Drivers: gpu/emu runs the g++-built kernel on host threads (cgo);
// gpu/cuda runs the nvcc-built kernel on an NVIDIA GPU through
// gorgonia.org/cu (build tag cuda). gpu/gputest compares a backend with
// the CPU reference backend byte for byte. docs/gpu.md describes the
// design and what is verified where.
package gpu
