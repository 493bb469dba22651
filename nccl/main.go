// Command nccl is mscclgo's NCCL-compatible library, built as a C shared
// library (make nccl: libmscclgo_nccl.so, soname libnccl.so.2). Loaded in
// place of NCCL (LD_PRELOAD, or first in the library path), it answers
// NCCL's C API (include/nccl.h): communicators over mscclgo's TCP
// bootstrap, the choice of an installed plan per collective call, and,
// for every call mscclgo does not take, the real NCCL, loaded with dlopen
// beside it (the fallback). docs/integration.md describes its use.
//
// The C face holds the exact NCCL prototypes and the fallback; the Go
// side holds the communicators and the decisions, and exports them to C.
package main

/*
#cgo CFLAGS: -std=c11 -Wall -Wextra -I${SRCDIR}
#cgo LDFLAGS: -ldl -lpthread
*/
import "C"

// main is empty: the package is a library (go build -buildmode=c-shared).
func main() {}
