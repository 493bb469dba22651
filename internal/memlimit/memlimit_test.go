package memlimit

import (
	"testing"
	"testing/fstest"

	"github.com/google/go-cmp/cmp"
)

func TestHeadroom(t *testing.T) {
	status := &fstest.MapFile{Data: []byte("Name:\tmscclgo\nVmSize:\t 5872025 kB\nVmRSS:\t 1000 kB\n")}
	meminfo := &fstest.MapFile{Data: []byte("MemTotal: 24000000 kB\nMemAvailable: 16777216 kB\n")}
	cases := []struct {
		name  string
		files fstest.MapFS
		as    uint64
		want  Headroom
	}{
		{"nothing readable", fstest.MapFS{}, 0, Headroom{}},
		{"available memory", fstest.MapFS{"proc/meminfo": meminfo}, 0,
			Headroom{16 << 30, "the machine's available memory, 16.0 GiB"}},
		{"address space", fstest.MapFS{"proc/meminfo": meminfo, "proc/self/status": status}, 8_000_000 << 10,
			Headroom{8_000_000<<10 - 5872025<<10, "the address-space limit (ulimit -v) of 7.6 GiB less the 5.6 GiB this process has reserved"}},
		{"address space already spent", fstest.MapFS{"proc/self/status": status}, 1 << 30,
			Headroom{0, "the address-space limit (ulimit -v) of 1.0 GiB less the 5.6 GiB this process has reserved"}},
		{"cgroup v2", fstest.MapFS{"proc/meminfo": meminfo, "sys/fs/cgroup/memory.max": {Data: []byte("4294967296\n")}, "sys/fs/cgroup/memory.current": {Data: []byte("1073741824\n")}}, 0,
			Headroom{3 << 30, "the cgroup memory limit of 4.0 GiB less the 1.0 GiB in use"}},
		{"cgroup without a limit", fstest.MapFS{"proc/meminfo": meminfo, "sys/fs/cgroup/memory.max": {Data: []byte("max\n")}}, 0,
			Headroom{16 << 30, "the machine's available memory, 16.0 GiB"}},
		{"cgroup v1", fstest.MapFS{"sys/fs/cgroup/memory/memory.limit_in_bytes": {Data: []byte("2147483648\n")}, "sys/fs/cgroup/memory/memory.usage_in_bytes": {Data: []byte("0\n")}}, 0,
			Headroom{2 << 30, "the cgroup memory limit of 2.0 GiB less the 0.0 MiB in use"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := headroom(c.files, c.as); got != c.want {
				t.Errorf("got %+v\nwant %+v", got, c.want)
			}
		})
	}
}

// TestNow: the process's own headroom is read and positive here.
func TestNow(t *testing.T) {
	h := Now()
	if h.What == "" {
		t.Skip("no /proc here")
	}
	if h.Bytes == 0 {
		t.Errorf("no headroom: %s", h.What)
	}
}

func TestMachine(t *testing.T) {
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
		n, src := machine(tt.fs)
		if d := cmp.Diff(tt.want, got{n, src}); d != "" {
			t.Errorf("%s (-want +got):\n%s", tt.name, d)
		}
	}
}
