package fabric

import (
	"strings"
	"testing"
)

// TestChooseRegistration: device memory is registered as itself
// (FI_HMEM_CUDA on its device) only where the provider offers FI_HMEM;
// host memory, and device memory without FI_HMEM, go through the host
// staging rings.
func TestChooseRegistration(t *testing.T) {
	for _, c := range []struct {
		name    string
		caps    uint64
		device  int
		staging bool
		why     string
	}{
		{"host memory, no FI_HMEM", 0, noDevice, true, "host memory"},
		{"host memory, FI_HMEM", capHMEM, noDevice, true, "host memory"},
		{"device 0, no FI_HMEM", 1<<9 | 1<<13, 0, true, "offers no FI_HMEM"},
		{"device 0, FI_HMEM", capHMEM | 1<<9, 0, false, "FI_HMEM_CUDA"},
		{"device 3, FI_HMEM", capHMEM, 3, false, "FI_HMEM_CUDA"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := chooseRegistration(c.caps, c.device)
			if r.Staging != c.staging || !strings.Contains(r.Why, c.why) {
				t.Fatalf("got %+v, want staging %v and a reason with %q", r, c.staging, c.why)
			}
			if !r.Staging && (r.Iface != ifaceCUDA || r.Device != c.device) {
				t.Fatalf("got %+v, want FI_HMEM_CUDA on device %d", r, c.device)
			}
		})
	}
}
