package main

// onstack.go: every init of a communicator moves the caller's signal
// handlers to the alternate signal stack (onstack.c says why).

/*
int mscclgo_handlers_onstack(void);
*/
import "C"

// handlersOnStack adds SA_ONSTACK to the process's signal handlers that
// lack it, and logs how many it moved.
func handlersOnStack() {
	if n := C.mscclgo_handlers_onstack(); n > 0 {
		logInfo("%d of the program's signal handlers lacked SA_ONSTACK (Go's rule for C code in its process): they run on the alternate signal stack now", int(n))
	}
}
