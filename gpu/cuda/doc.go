//go:build cuda

// doc.go holds the package comment.

// Package cuda is the gpu.Driver of NVIDIA devices: the nvcc-built plan
// interpreter (csrc/interp.cu) run through the CUDA driver API, by way of
// gorgonia.org/cu and a small cgo file for what cu does not wrap.
//
// Every file carries the cuda build tag, since cu's package init calls
// cuInit and exits the process when no driver or device is present: the
// default binary must not link it. Build with `make gpu` (which compiles
// the kernel images this package embeds, then `go build -tags cuda`).
//
// The package holds:
//
//   - Open (driver.go): the driver of one device. It retains the device's
//     primary context, loads the interpreter from the embedded kernel
//     image that suits the device (kernels.go), raises the kernel's
//     dynamic shared-memory limit, and creates three non-blocking
//     streams: the launch stream (the per-launch table copies from pinned
//     memory, memsets and the kernel; graph capture and replay), the
//     proxy's copy stream (its copies and the words it posts after them)
//     and the watch stream (the watchdog's reads of the progress records
//     and its abort write), so that copies and reads proceed while the
//     kernel runs. UseKernel picks the interpreter entry of a session.
//   - hostMem (hostmem.go): pinned, device-mapped host memory whose words
//     the host reads and writes with sync/atomic while the kernel runs.
//   - capi.go: cgo wrappers of the driver calls cu lacks
//     (cuMemHostAlloc, cuMemHostGetDevicePointer, cuFuncSetAttribute,
//     IPC, stream capture and graphs) and Error, a failed driver call.
//
// Every driver call runs with the OS thread locked and the context pushed
// current for the call (driver.do), so that any goroutine may use the
// driver. The tests run on machines without a GPU against a fake
// libcuda.so.1 (testdata/fakecuda) that runs the g++-built interpreter on
// host threads; see `make gpu-test`.
package cuda
