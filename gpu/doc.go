// Package gpu is the host runtime of mscclgo's GPU backend: an
// executor.Backend that runs instantiated plans on the plan interpreter
// kernel of csrc/ through a Driver, the seam between the runtime and a
// device. New makes the backend from a Config whose Open returns the
// driver of each session:
//
//	b := gpu.New(gpu.Config{Name: "gpu-emu", Open: emu.Open})
//	sess, err := b.Open(inst, opts) // then sess.Launch, as with any executor.Backend
//
// A session encodes the instance into the kernel's tables (the Go mirror
// of csrc/mscclgo/layout.h), keeps the persistent device state (scratch,
// channel counters, semaphores, barriers, port-channel FIFOs), and runs
// each launch with one proxy goroutine per rank with port channels and a
// watchdog that turns a launch without progress into an
// *executor.DeadlockError. OpenRank runs one rank of a job started as one
// process per rank.
//
// Drivers: gpu/emu runs the g++-built kernel on host threads (cgo);
// gpu/cuda runs the nvcc-built kernel on an NVIDIA GPU through
// gorgonia.org/cu (build tag cuda). gpu/gputest compares a backend with
// the CPU reference backend byte for byte. docs/gpu.md describes the
// design and what is verified where.
package gpu
