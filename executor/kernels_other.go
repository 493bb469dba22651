//go:build !amd64 || purego

package executor

// Without the vector kernels (another architecture, or the purego build
// tag) the loops of kernels.go take every element.

// HasVectorKernels reports whether Add and Reduce run the vector kernels
// of kernels_amd64.s on this machine: never in this build.
func HasVectorKernels() bool { return false }

func vec16(ElemType, ReduceOp, []uint16, []uint16, []uint16, bool) int { return 0 }
func vec32(ElemType, ReduceOp, []uint32, []uint32, []uint32, bool) int { return 0 }
