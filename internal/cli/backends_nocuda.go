//go:build !cuda

package cli

// backends_nocuda.go: the default binary has no CUDA backend; --backend
// gpu hands over to the mscclgo-cuda worker (backends.go).

func cudaBackends() []runBackend { return nil }
