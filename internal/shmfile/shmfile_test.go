//go:build linux

package shmfile

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestNames(t *testing.T) {
	o := Owner{UID: 1000, PID: 4242, Start: 987654, Key: 0xdeadbeef}
	name := o.name("rank", 0x1234)
	if want := "mscclgo-rank-1000-4242-987654-deadbeef-00001234"; name != want {
		t.Fatalf("name %q, want %q", name, want)
	}
	kind, got, ok := parseName(name)
	if !ok || kind != "rank" || got != o {
		t.Fatalf("parseName(%q) = %q %+v %v, want rank %+v", name, kind, got, ok, o)
	}
	for _, bad := range []string{
		"mscclgo-rank-123456789",      // the form before owners were named
		"mscclgo-comm-987654321",      // likewise
		"mscclgo-rank-1-2-3-deadbeef", // too few fields
		"mscclgo-Rank-0-1-2-deadbeef-00000000",
		"mscclgo-rank-0-0-2-deadbeef-00000000", // pid 0
		"mscclgo-rank-0-x-2-deadbeef-00000000",
		"mscclgo-rank-0-1-2-deadbee-00000000",
		"mscclgo-rank-0-1-2-deadbeef-0000000g",
		"mscclgo-rank-0-1-2-deadbeef-00000000-x",
		"other-rank-0-1-2-deadbeef-00000000",
	} {
		if _, _, ok := parseName(bad); ok {
			t.Errorf("parseName(%q) took it for a file of Create's", bad)
		}
	}
}

func TestParseStat(t *testing.T) {
	fields := func(state string, start uint64) string {
		f := []string{state}
		for i := 1; i < 19; i++ {
			f = append(f, strconv.Itoa(i))
		}
		return strings.Join(append(f, strconv.FormatUint(start, 10), "0", "0"), " ")
	}
	for _, c := range []struct {
		line  string
		pid   int
		state byte
		start uint64
		ok    bool
	}{
		{"12 (sleep) " + fields("S", 555), 12, 'S', 555, true},
		{"13 (a (b) c) " + fields("Z", 7), 13, 'Z', 7, true},
		{"14 (x) S 1 2", 0, 0, 0, false},
		{"garbage", 0, 0, 0, false},
	} {
		pid, state, start, ok := parseStat([]byte(c.line))
		if pid != c.pid || state != c.state || start != c.start || ok != c.ok {
			t.Errorf("parseStat(%q) = %d %q %d %v, want %d %q %d %v", c.line, pid, state, start, ok, c.pid, c.state, c.start, c.ok)
		}
	}
	me, ok := self()
	if !ok || me.PID != os.Getpid() || me.Start == 0 || me.Key == 0 {
		t.Fatalf("self() = %+v %v", me, ok)
	}
	if !alive(me) {
		t.Fatal("alive(self()) is false")
	}
}

func TestBytesOf(t *testing.T) {
	for n, want := range map[uint64]string{
		0: "0 bytes", 1000: "1000 bytes", 1024: "1 KiB", 64 << 20: "64 MiB", 3 << 30: "3 GiB",
		64<<20 + 64: "64.0 MiB (67108928 bytes)", 1536: "1.5 KiB (1536 bytes)",
	} {
		if got := bytesOf(n); got != want {
			t.Errorf("bytesOf(%d) = %q, want %q", n, got, want)
		}
	}
}

// TestCreateReserves: the file has its size and its room (blocks), and
// its name records this process.
func TestCreateReserves(t *testing.T) {
	dir := t.TempDir()
	f, err := Create(dir, "rank", 3<<20+100)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	if st.Size != 3<<20+100 || uint64(st.Blocks)*512 < 3<<20+100 {
		t.Errorf("%s: %d bytes in %d blocks, want %d bytes all reserved", f.Name(), st.Size, st.Blocks, 3<<20+100)
	}
	kind, o, ok := parseName(filepath.Base(f.Name()))
	me, _ := self()
	if !ok || kind != "rank" || o != me {
		t.Errorf("%s: owner %+v (%v), want %+v", f.Name(), o, ok, me)
	}
}

func TestDirSetting(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(EnvDir, dir)
	if got, err := Dir(""); got != dir || err != nil {
		t.Errorf("Dir with %s=%s: %q %v", EnvDir, dir, got, err)
	}
	if got, _ := Dir("/x"); got != "/x" {
		t.Errorf("Dir(/x) = %q", got)
	}
	t.Setenv(EnvDir, filepath.Join(dir, "nope"))
	_, err := Create("", "rank", 4096)
	if want := EnvDir + "=" + filepath.Join(dir, "nope") + ": not a directory"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("Create with a missing %s: %v, want %q", EnvDir, err, want)
	}
}

// TestNoRoomMessage is the error of a full directory with the file
// system's answers replaced (no mount needed): it names the file, the
// room needed and free, the running jobs' files there, and the remedy,
// and leaves no file behind.
func TestNoRoomMessage(t *testing.T) {
	dir := t.TempDir()
	sys := host()
	sys.reserve = func(*os.File, int64) error { return fmt.Errorf("fallocate: %w", syscall.ENOSPC) }
	sys.space = func(string) (uint64, uint64, error) { return 12 << 20, 64 << 20, nil }
	// A live job's file (this process's own) holding room there.
	held, err := Create(dir, "comm", 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	held.Close()
	_, err = create(sys, dir, "rank", 64<<20)
	if err == nil {
		t.Fatal("no error")
	}
	for _, w := range []string{"shared memory: no room in " + dir + " for mscclgo-rank-", "it needs 64 MiB",
		dir + " has 12 MiB free of 64 MiB", "(1 file(s) of running mscclgo jobs hold 1 MiB of it)", "set MSCCLGO_SHM_DIR to a directory with room"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error lacks %q:\n%v", w, err)
		}
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "mscclgo-rank-*")); len(left) > 0 {
		t.Errorf("left behind: %v", left)
	}
	if r := remedy("/dev/shm"); !strings.Contains(r, "docker run --shm-size=") || !strings.Contains(r, EnvDir) {
		t.Errorf("remedy for /dev/shm: %q", r)
	}
}

// smallTmpfs mounts a tmpfs of size bytes (root only), or skips t.
func smallTmpfs(t *testing.T, size int) string {
	t.Helper()
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", fmt.Sprintf("size=%d", size), "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a small tmpfs (needs root and CAP_SYS_ADMIN; TestNoRoomMessage covers the message without one): %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
	return dir
}

// TestNoRoomTmpfs: a file larger than a small tmpfs fails at creation
// with the real numbers (before, it was made and its first touch past
// the room was a SIGBUS); one that fits is made.
func TestNoRoomTmpfs(t *testing.T) {
	dir := smallTmpfs(t, 1<<20)
	_, err := Create(dir, "rank", 4<<20)
	if err == nil {
		t.Fatal("a 4 MiB file in a 1 MiB tmpfs: no error")
	}
	for _, w := range []string{"no room in " + dir, "it needs 4 MiB", "free of 1 MiB"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error lacks %q:\n%v", w, err)
		}
	}
	if ents, _ := os.ReadDir(dir); len(ents) > 0 {
		t.Errorf("left behind: %v", ents)
	}
	f, err := Create(dir, "rank", 512<<10)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
}

// child starts a process that lives until killed, and its owner record.
func child(t *testing.T) (*exec.Cmd, Owner) {
	t.Helper()
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	_, _, start, ok := parseStat(b)
	if !ok {
		t.Fatalf("/proc/%d/stat: %q", cmd.Process.Pid, b)
	}
	me, _ := self()
	return cmd, Owner{UID: me.UID, PID: cmd.Process.Pid, Start: start, Key: me.Key}
}

// TestReap: only the files of this user, machine boot and pid namespace
// whose owner is gone (exited, a zombie, or its pid taken by a later
// process) are removed.
func TestReap(t *testing.T) {
	me, ok := self()
	if !ok {
		t.Skip("/proc does not show this process")
	}
	live, liveOwner := child(t)
	_ = live
	zombie, zombieOwner := child(t)
	if err := zombie.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// Not waited for yet: a zombie (wait for the state to show).
	for i := 0; ; i++ {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", zombieOwner.PID))
		if _, st, _, _ := parseStat(b); st == 'Z' || i == 500 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	gone, goneOwner := child(t)
	_ = gone.Process.Kill()
	_ = gone.Wait()
	reused := me
	reused.Start++ // this pid, an earlier process's
	other := func(f func(*Owner)) Owner {
		o := liveOwner
		o.PID = goneOwner.PID
		o.Start = goneOwner.Start
		f(&o)
		return o
	}

	dir := t.TempDir()
	for _, c := range []struct {
		name string
		file string
		reap bool
	}{
		{"exited", goneOwner.name("rank", 1), true},
		{"zombie", zombieOwner.name("rank", 2), true},
		{"pid reused", reused.name("comm", 3), true},
		{"live", liveOwner.name("rank", 4), false},
		{"self", me.name("rank", 5), false},
		{"other user", other(func(o *Owner) { o.UID++ }).name("rank", 6), false},
		{"other machine or namespace", other(func(o *Owner) { o.Key++ }).name("rank", 7), false},
		{"owner not known", other(func(o *Owner) { o.Key = 0 }).name("rank", 8), false},
		{"older version", "mscclgo-rank-123456789", false},
		{"not ours", "other-file", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(dir, c.file)
			if err := os.WriteFile(path, []byte("x"), 0o600); err != nil {
				t.Fatal(err)
			}
			removed, held := reap(host(), dir, me)
			_, err := os.Stat(path)
			if gone := errors.Is(err, os.ErrNotExist); gone != c.reap || slices.Contains(removed, path) != c.reap {
				t.Errorf("%s: removed %v (reported %v), want %v", c.file, gone, removed, c.reap)
			}
			if !c.reap && strings.HasPrefix(c.file, prefix) && held.files == 0 {
				t.Errorf("%s: not counted as held", c.file)
			}
			os.Remove(path)
		})
	}
	if os.Geteuid() == 0 {
		// Named for this user, owned by another: left alone.
		path := filepath.Join(dir, goneOwner.name("rank", 9))
		if err := os.WriteFile(path, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(path, 12345, 12345); err != nil {
			t.Fatal(err)
		}
		if removed, _ := reap(host(), dir, me); len(removed) > 0 {
			t.Errorf("removed another user's file: %v", removed)
		}
	}
}

// TestReapKilled: the file of a process killed (SIGKILL) while it held it
// is removed by the next Create; a live process's file stays.
func TestReapKilled(t *testing.T) {
	if os.Getenv("SHMFILE_HOLD") != "" {
		f, err := Create(os.Getenv("SHMFILE_HOLD"), "rank", 1<<20)
		if err != nil {
			fmt.Println(err)
			os.Exit(2)
		}
		fmt.Println(f.Name())
		time.Sleep(time.Minute)
		os.Exit(0)
	}
	dir := t.TempDir()
	hold := func() (*exec.Cmd, string) {
		cmd := exec.Command(os.Args[0], "-test.run=^TestReapKilled$")
		cmd.Env = append(os.Environ(), "SHMFILE_HOLD="+dir)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		b := make([]byte, 4096)
		n, _ := out.Read(b)
		path := strings.TrimSpace(string(b[:n]))
		if !strings.HasPrefix(path, dir) {
			t.Fatalf("the holder said %q", path)
		}
		return cmd, path
	}
	killed, stale := hold()
	_, live := hold()
	if err := killed.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = killed.Wait()
	if _, err := os.Stat(stale); err != nil {
		t.Fatalf("the killed process's file: %v", err)
	}
	f, err := Create(dir, "rank", 4096)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	os.Remove(f.Name())
	if _, err := os.Stat(stale); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the killed process's file %s is still there (%v)", stale, err)
	}
	if _, err := os.Stat(live); err != nil {
		t.Errorf("the live process's file %s: %v", live, err)
	}
}
