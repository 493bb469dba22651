//go:build cuda

package cuda

// cgoflags.go holds the package's cgo flags: the driver API header comes
// from the toolkit's include directory (/usr/include on Debian, or
// /usr/local/cuda/include) and the calls bind to libcuda.so.1 at run time.

// #cgo linux CFLAGS: -I/usr/local/cuda/include
// #cgo LDFLAGS: -lcuda
// #cgo linux LDFLAGS: -L/usr/local/cuda/lib64
import "C"
