package cpu

import (
	"github.com/mscclgo/mscclgo/executor"
)

// Validate makes the checks Open makes on inst with opts (the channel,
// switch and op tables), without allocating the session.
func Validate(inst *executor.Instance, opts executor.Options) error {
	return validate(inst, opts)
}

// Check makes the checks a Launch of inst with opts on bufs makes before
// anything runs, without running it: the instance's channel, switch and
// op tables (what Open validates) and every operand of every op, every
// pipeline iteration included, resolved against bufs and the scratch
// (bounds, element sizes). Other backends call it so that a launch they
// accept is one the CPU backend accepts, and so that no kernel is handed
// an operand outside its buffers.
func Check(inst *executor.Instance, opts executor.Options, bufs []executor.RankBuffers) error {
	s, err := open(inst, opts, schedule{})
	if err != nil {
		return err
	}
	defer s.Close()
	if len(bufs) != len(s.ranks) {
		return errRankCount(len(bufs), len(s.ranks))
	}
	return newLaunch(s, bufs, 1).precheck()
}
