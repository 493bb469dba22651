// Tests of run's memory budget: the machine's memory, the cgroup limit,
// --max-memory, and the refusal message.
package cli

import (
	"testing"
	"testing/fstest"

	"github.com/google/go-cmp/cmp"

	"github.com/mscclgo/mscclgo/executor"
)

func TestMachineMemory(t *testing.T) {
	t.Parallel()
	meminfo := func(kb string) *fstest.MapFile {
		return &fstest.MapFile{Data: []byte("MemFree:         1000 kB\nMemTotal:       " + kb + " kB\nSwapTotal: 0 kB\n")}
	}
	type got struct {
		Bytes uint64
		Src   string
	}
	tests := []struct {
		name string
		fs   fstest.MapFS
		want got
	}{
		{"meminfo only", fstest.MapFS{"proc/meminfo": meminfo("24683656")}, got{24683656 << 10, "this machine's 23.5 GiB"}},
		{"cgroup v2 lower", fstest.MapFS{"proc/meminfo": meminfo("24683656"), "sys/fs/cgroup/memory.max": {Data: []byte("4294967296\n")}},
			got{4 << 30, "the cgroup memory limit of 4.0 GiB"}},
		{"cgroup v2 unlimited", fstest.MapFS{"proc/meminfo": meminfo("24683656"), "sys/fs/cgroup/memory.max": {Data: []byte("max\n")}},
			got{24683656 << 10, "this machine's 23.5 GiB"}},
		{"cgroup v2 higher", fstest.MapFS{"proc/meminfo": meminfo("1048576"), "sys/fs/cgroup/memory.max": {Data: []byte("4294967296\n")}},
			got{1 << 30, "this machine's 1.0 GiB"}},
		{"cgroup v1 unlimited", fstest.MapFS{"proc/meminfo": meminfo("1048576"), "sys/fs/cgroup/memory/memory.limit_in_bytes": {Data: []byte("9223372036854771712\n")}},
			got{1 << 30, "this machine's 1.0 GiB"}},
		{"cgroup v1 lower", fstest.MapFS{"proc/meminfo": meminfo("1048576"), "sys/fs/cgroup/memory/memory.limit_in_bytes": {Data: []byte("536870912\n")}},
			got{512 << 20, "the cgroup memory limit of 512.0 MiB"}},
		{"cgroup only", fstest.MapFS{"sys/fs/cgroup/memory.max": {Data: []byte("2147483648")}}, got{2 << 30, "the cgroup memory limit of 2.0 GiB"}},
		{"garbled meminfo", fstest.MapFS{"proc/meminfo": {Data: []byte("MemTotal: lots\n")}}, got{}},
		{"nothing readable", fstest.MapFS{}, got{}},
	}
	for _, tt := range tests {
		n, src := machineMemory(tt.fs)
		if d := cmp.Diff(tt.want, got{n, src}); d != "" {
			t.Errorf("%s (-want +got):\n%s", tt.name, d)
		}
	}
}

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
	use := executor.MemoryUse{Ranks: 8, Buffers: 32 << 30, Tables: 8 << 30}
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
