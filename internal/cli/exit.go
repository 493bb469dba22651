package cli

// Exit statuses of mscclgo. They are stable: scripts may rely on them.
const (
	// ExitOK means success.
	ExitOK = 0
	// ExitError means the command failed: a script error, a pass error, an
	// I/O error. The language contract fixes this status for eval errors.
	ExitError = 1
	// ExitUsage means the command line was wrong.
	ExitUsage = 2
	// ExitDeadlock means a `run` launch deadlocked: no thread block could
	// make progress.
	ExitDeadlock = 3
	// ExitRace means `run --race` found conflicting accesses with no
	// happens-before order.
	ExitRace = 4
)

// exitError carries an exit status with an error message.
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

func usageErr(format string, args ...any) error {
	return &exitError{code: ExitUsage, msg: sprintf(format, args...)}
}
