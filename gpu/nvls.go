package gpu

// nvls.go says which path a plan's switch channels (NVLS) take on the
// device.

import (
	"fmt"

	"github.com/mscclgo/mscclgo/executor"
)

// nvlsBranch says which path switch channels take on a device described
// by info: the multimem instructions need a multicast object bound to
// every member's buffer (a switch's mc pointer); without one every
// switch op runs the unicast fallback, a loop over the members' buffers,
// which gives the same bytes. Empty when the plan has no switch channel.
func nvlsBranch(inst *executor.Instance, info DeviceInfo) string {
	n := 0
	for _, ri := range inst.Ranks {
		n += len(ri.Switches)
	}
	if n == 0 {
		return ""
	}
	if !info.Multicast {
		return fmt.Sprintf("unicast fallback for %d switch channels: %s has no NVLS multicast (CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED is 0)", n, info.Name)
	}
	return fmt.Sprintf("unicast fallback for %d switch channels: %s supports NVLS multicast, but this build does not create multicast objects (cuMulticastCreate) yet", n, info.Name)
}

// NVLS says which path the plan's switch channels take on the device
// (the unicast fallback, and why); empty when the plan has none.
func (s *session) NVLS() string { return s.nvls }

// NVLS says which path the plan's switch channels take on the device.
func (r *RankSession) NVLS() string { return r.s.nvls }
