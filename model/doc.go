// Package model predicts the time of an MSCCL++ execution plan on named
// hardware: a discrete-event simulation of one call of an instantiated
// plan (executor.Instance), thread block by thread block, with signals,
// waits, semaphores, barriers, LL packets, the port-channel proxy and
// pipelines, and per-op costs from a hardware profile (Profile). Concurrent
// transfers share each GPU's NVLink egress and ingress, HBM and NIC by
// max-min fair sharing, recomputed at every event. A port-channel trigger
// that crosses nodes pays its path term by term: the FIFO push, PCIe
// traversals, the host proxy, both NICs and the waiter's poll. Predict
// returns the predicted time and a timeline.Timeline of the call; Sweep
// predicts a range of sizes; Fit fits a profile's parameters to measured
// results. Per-op costs are MSCCL++'s kernel's by default; with
// Options.Kernel KernelMSCCLGO they are this project's interpreter's,
// derived from the audit of its machine code (kernel.go, kernel_table.go).
// docs/model.md describes the model, its parameters and its known
// errors.
package model
