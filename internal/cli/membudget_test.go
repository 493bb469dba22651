// Tests of run's memory budget: the machine's memory, the cgroup limit,
// --max-memory, and the refusal message.
package cli

import (
	"testing"

	"github.com/mscclgo/mscclgo/harness"
)

func TestRunBudget(t *testing.T) {
	t.Parallel()
	b, err := runBudget("1G", true)
	if err != nil || b != (memoryBudget{bytes: 1 << 30, why: "--max-memory"}) {
		t.Errorf("runBudget(1G) = %+v, %v", b, err)
	}
	if b, err := runBudget("0", true); err != nil || b.bytes != 0 {
		t.Errorf("runBudget(0) = %+v, %v: want no budget", b, err)
	}
	if _, err := runBudget("lots", true); err == nil {
		t.Error("runBudget(lots): no error")
	}
	if b, err := runBudget("", false); err != nil || b.bytes == 0 {
		t.Errorf("default budget %+v, %v", b, err)
	}
}

func TestCheckBudget(t *testing.T) {
	t.Parallel()
	use := harness.MemoryUse{Ranks: 8, Buffers: 32 << 30, Tables: 8 << 30}
	err := checkBudget("plan.json", 4<<30, use, memoryBudget{bytes: 12 << 30, why: "half of this machine's 24.0 GiB"})
	want := "plan.json: size 4294967296: a run needs about 40.0 GiB (8 ranks × 4.0 GiB of buffers + 8.0 GiB of generator and expected-result tables), " +
		"above the memory budget of 12.0 GiB (half of this machine's 24.0 GiB); --max-memory raises it"
	if err == nil || err.Error() != want {
		t.Errorf("checkBudget = %v, want %s", err, want)
	}
	for _, b := range []memoryBudget{{bytes: 40 << 30}, {bytes: 0}} {
		if err := checkBudget("plan.json", 4<<30, use, b); err != nil {
			t.Errorf("budget %d: %v", b.bytes, err)
		}
	}
}
