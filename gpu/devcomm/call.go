package devcomm

import (
	"errors"
	"fmt"

	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/gpu"
)

// Call is one collective call of a rank.
type Call struct {
	// Key names the plan instance (plan, sizes, element type, in-place):
	// the session is opened once per key. Every rank's key for one call
	// must be the same.
	Key string
	// Desc is the call as the caller names it (function, count, type),
	// for the error of a mismatch; every rank's must be the same.
	Desc string
	// Open returns the instance, its buffer layout and options; called at
	// the first call of Key.
	Open func() (*executor.Instance, *executor.BufferLayout, executor.Options, error)
	// In and Out are the rank's input and output on the device, of the
	// layout's sizes and, in place, at its relative position.
	In, Out gpu.DevPtr
	// Stream is the caller's stream.
	Stream gpu.Stream
	// Reduce is the call's reduction (the zero value: sum). It is part
	// of the session's identity: the communicator keeps one session per
	// Key and Reduce (sessionKey), compares both across the ranks, and
	// opens the session with Options.Reduce = Reduce. Open may leave
	// its Options.Reduce at ReduceSum or set it to Reduce; any other
	// value is an error of the call.
	Reduce executor.ReduceOp
}

// sessionKey is the key of the call's session: Key itself for a sum
// (the keys every caller used before reductions existed), else Key with
// the reduction's name appended.
func (call Call) sessionKey() string {
	if call.Reduce == executor.ReduceSum {
		return call.Key
	}
	return call.Key + "\x00reduce=" + call.Reduce.String()
}

// openCall is call.Open with the call's reduction in the options.
func (call Call) openCall() (*executor.Instance, *executor.BufferLayout, executor.Options, error) {
	inst, l, opts, err := call.Open()
	if err != nil {
		return inst, l, opts, err
	}
	if opts.Reduce != executor.ReduceSum && opts.Reduce != call.Reduce {
		return inst, l, opts, fmt.Errorf("%s: the call reduces with %v, its Open's options with %v", call.Desc, call.Reduce, opts.Reduce)
	}
	opts.Reduce = call.Reduce
	return inst, l, opts, nil
}

// ErrNotCapturable says that a plan cannot run on a stream that is being
// captured into a graph; errors.Is finds it in Enqueue's error.
var ErrNotCapturable = errors.New("the plan cannot be captured into a graph")

// capturable says whether every launch of inst can run from a graph's
// replay alone: no port channels (each launch needs the host's proxy)
// and no per-call tables (variable-size plans).
func capturable(inst *executor.Instance) error {
	for r := range inst.Ranks {
		if n := len(inst.Ranks[r].PortChannels); n > 0 {
			return fmt.Errorf("%w: rank %d has %d port channels, which the host's proxy serves at each launch", ErrNotCapturable, r, n)
		}
	}
	if inst.Var != nil {
		return fmt.Errorf("%w: its buffer sizes are set per call (variable-size plan)", ErrNotCapturable)
	}
	return nil
}

// opened is a plan instance made ahead of the ranks' meeting (a call on
// a capturing stream, which is checked first), or its error.
type opened struct {
	inst *executor.Instance
	l    *executor.BufferLayout
	opts executor.Options
	err  error
}

// checkUser checks the caller's buffers against the layout: in place
// where the layout is (at its relative position), apart where it is not.
func checkUser(l *executor.BufferLayout, rank int, in, out gpu.DevPtr) error {
	inOff, outOff := l.Offsets(rank)
	inLen, outLen := l.Sizes.Input, l.Sizes.Output
	if inLen > 0 && outLen > 0 && inOff < outOff+outLen && outOff < inOff+inLen {
		d := int64(inOff) - int64(outOff)
		if int64(in)-int64(out) != d {
			return fmt.Errorf("the input (%#x) must be at %d bytes from the output (%#x) for this in-place plan", uint64(in), d, uint64(out))
		}
		return nil
	}
	if uint64(in) < uint64(out)+outLen && uint64(out) < uint64(in)+inLen {
		return fmt.Errorf("the input (%#x, %d bytes) and output (%#x, %d bytes) overlap, and the plan is out of place", uint64(in), inLen, uint64(out), outLen)
	}
	return nil
}

// bufRec is one of a rank's buffers in a call's record.
type bufRec struct {
	Ptr  gpu.DevPtr `json:"ptr"`
	Base gpu.DevPtr `json:"base"` // the allocation (or the buffer itself)
	Size uint64     `json:"size"`
	ID   uint64     `json:"id,omitempty"` // the allocation's id (gpu.AllocIDer)
	// Handle is the allocation's IPC handle, when it is new to the peers
	// in other processes.
	Handle *gpu.IpcHandle `json:"handle,omitempty"`
}

// callRec is what each rank says of a call.
type callRec struct {
	Err  string    `json:"err,omitempty"`
	Key  string    `json:"key"`
	Desc string    `json:"desc"`
	Bufs [2]bufRec `json:"bufs"`
}
