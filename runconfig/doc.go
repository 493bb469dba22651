// Package runconfig is the run-time configuration of a program that runs
// plans on the GPU backends or across processes: one Settings value
// holds the transport of port channels between processes (tcp, fabric,
// auto), the timeouts, the threads per block and the plan-instance
// sessions a communicator keeps. The command line (internal/cli) builds
// it from its flags, the NCCL-compatible library (nccl) from the
// environment (FromEnv); from it come the complete gpu.Config of a
// device (Settings.GPUConfig, every field) and the transport of a job
// (Settings.OpenTransport).
//
// To start:
//
//	s, err := runconfig.FromEnv(os.Getenv) // or a Settings from flags
//	cfg := s.GPUConfig(runconfig.Device{Name: "gpu-emu", Open: emu.Open})
//	carrier, err := s.OpenTransport(ctx, bootstrapNet)
//	defer carrier.Close()
//
// It imports the GPU backend's host runtime (gpu) and the transports
// (executor/fabric, executor/rankwire), never the compiler.
package runconfig
