package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// shm_test.go is issue 44's shared memory: a small /dev/shm (Docker's is
// 64 MiB unless docker run --shm-size says otherwise) and the files a
// killed job leaves there, with testdata/shmjob.c as the ranks of jobs of
// processes. Before, a host-memory session larger than /dev/shm's room
// and a mailbox in a full /dev/shm were a SIGBUS at the first touch of
// the page tmpfs could not give; a SIGKILLed job's files stayed for good.

var (
	shmjobOnce sync.Once
	shmjobErr  error
)

// shmjobProgram builds testdata/shmjob.c against the library, beside
// artifacts' builds, and returns its path.
func shmjobProgram(t *testing.T) string {
	dir := artifacts(t)
	shmjobOnce.Do(func() {
		s := []string{"gcc", "-std=c11", "-Wall", "-Wextra", "-Werror", "-DMSCCLGO_NCCL_NO_CUDA_RUNTIME", "-Iinclude",
			"-o", filepath.Join(dir, "shmjob"), "testdata/shmjob.c",
			"-L" + filepath.Join(dir, "ours"), "-l:libnccl.so.2", "-Wl,-rpath," + filepath.Join(dir, "ours"), "-ldl"}
		if out, err := exec.Command(s[0], s[1:]...).CombinedOutput(); err != nil || len(out) > 0 {
			shmjobErr = fmt.Errorf("%s: %v\n%s", strings.Join(s, " "), err, out)
		}
	})
	if shmjobErr != nil {
		t.Fatal(shmjobErr)
	}
	return filepath.Join(dir, "shmjob")
}

// shmSpace is the /dev/shm of a test's jobs: a tmpfs of its own, mounted
// at /dev/shm in a private mount namespace that a holder process keeps
// (the jobs enter it with nsenter), or, where none can be made, a
// directory that MSCCLGO_SHM_DIR names.
type shmSpace struct {
	dir   string   // the files' directory, as this process reaches it
	enter []string // the command prefix that runs a job in the namespace
	env   []string // the jobs' setting of the directory
}

// privateShm makes a mount namespace whose /dev/shm is a tmpfs of size
// bytes (root only: mount needs CAP_SYS_ADMIN).
func privateShm(t *testing.T, size int) (*shmSpace, error) {
	t.Helper()
	for _, tool := range []string{"unshare", "nsenter"} {
		if _, err := exec.LookPath(tool); err != nil {
			return nil, fmt.Errorf("no %s (util-linux)", tool)
		}
	}
	holder := exec.Command("unshare", "-m", "--propagation", "private", "sh", "-c",
		fmt.Sprintf("mount -t tmpfs -o size=%d tmpfs /dev/shm && echo ready && exec sleep 600", size))
	var stderr bytes.Buffer
	holder.Stderr = &stderr
	out, err := holder.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := holder.Start(); err != nil {
		return nil, err
	}
	ready := make(chan bool, 1)
	go func() {
		line, _ := bufio.NewReader(out).ReadString('\n')
		ready <- line == "ready\n"
	}()
	select {
	case ok := <-ready:
		if !ok {
			_ = holder.Wait()
			return nil, fmt.Errorf("unshare -m and mount -t tmpfs (needs root): %s", strings.TrimSpace(stderr.String()))
		}
	case <-time.After(20 * time.Second):
		_ = holder.Process.Kill()
		_ = holder.Wait()
		return nil, fmt.Errorf("the namespace's holder did not say it was ready within 20 s")
	}
	t.Cleanup(func() { _ = holder.Process.Kill(); _ = holder.Wait() })
	pid := strconv.Itoa(holder.Process.Pid)
	return &shmSpace{dir: "/proc/" + pid + "/root/dev/shm", enter: []string{"nsenter", "-t", pid, "-m", "--"}}, nil
}

// shmJob is a running job of shmjob processes.
type shmJob struct {
	cmds []*exec.Cmd
	outs []*lockedBuffer
	done []chan struct{} // closed when the rank has exited, with errs[r]
	errs []error
}

// lockedBuffer is a rank's output, read while the rank writes it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// startShmJob starts n ranks of shmjob with args in sp, env added to a
// clean set; before(r) prefixes rank r's command (nil: none).
func startShmJob(t *testing.T, sp *shmSpace, n int, env []string, before func(r int) []string, args ...string) *shmJob {
	t.Helper()
	prog := shmjobProgram(t)
	idFile := filepath.Join(t.TempDir(), "id")
	j := &shmJob{}
	for r := range n {
		argv := append(append([]string{}, sp.enter...), before(r)...)
		argv = append(append(argv, prog), args...)
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Env = append(append(append(cleanEnv(), "MSCCLGO_CACHE_DIR="+t.TempDir(), "MSCCLGO_NCCL_FALLBACK=none", "MSCCLGO_TRANSPORT=tcp",
			"RANK="+strconv.Itoa(r), "WORLD_SIZE="+strconv.Itoa(n), "SHMJOB_ID_FILE="+idFile), sp.env...), env...)
		out := &lockedBuffer{}
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		j.cmds, j.outs, j.done, j.errs = append(j.cmds, cmd), append(j.outs, out), append(j.done, make(chan struct{})), append(j.errs, nil)
	}
	for r, cmd := range j.cmds {
		go func() { j.errs[r] = cmd.Wait(); close(j.done[r]) }()
	}
	t.Cleanup(j.kill)
	return j
}

// wait waits for every rank (90 s at most: past that, a hang) and returns
// their outputs; a rank that did not exit 0 fails t.
func (j *shmJob) wait(t *testing.T) []string {
	t.Helper()
	outs := make([]string, len(j.cmds))
	deadline := time.After(90 * time.Second)
	for r := range j.cmds {
		select {
		case <-j.done[r]:
			outs[r] = j.outs[r].String()
			if j.errs[r] != nil {
				t.Errorf("rank %d: %v (a crash or a failed set-up):\n%s", r, j.errs[r], outs[r])
			}
		case <-deadline:
			j.kill()
			t.Fatalf("rank %d ran past 90 s (a hang):\n%s", r, j.outs[r])
		}
	}
	return outs
}

// kill SIGKILLs every rank still running (and whatever its command
// prefix started) and waits for them.
func (j *shmJob) kill() {
	for r, cmd := range j.cmds {
		if pid := shmjobPid(j.outs[r].String()); pid > 0 {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		_ = cmd.Process.Kill()
	}
	for r := range j.cmds {
		select {
		case <-j.done[r]:
		case <-time.After(10 * time.Second):
		}
	}
}

// shmjobPid is the pid a rank said it has ("rank R: pid P"), 0 before it
// said.
func shmjobPid(out string) int {
	for _, l := range strings.Split(out, "\n") {
		if _, p, ok := strings.Cut(l, ": pid "); ok && strings.HasPrefix(l, "rank ") {
			pid, _ := strconv.Atoi(p)
			return pid
		}
	}
	return 0
}

// shmFiles lists the mscclgo files in dir.
func shmFiles(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "mscclgo-") {
			names = append(names, e.Name())
		}
	}
	return names
}

// noPrefix runs a rank as it is.
func noPrefix(int) []string { return nil }

// shmPlans are plans of any size for two ranks.
func shmPlans(t *testing.T) string {
	return bundledPlans(t, map[string]planDef{"allreduce_rsag.json": {"allreduce_rsag", map[string]string{"world_size": "2"}}})
}

// TestSmallShm: in a 1 MiB /dev/shm (a tmpfs of its own, in a mount
// namespace of the test's), a host-memory session of two processes
// larger than that fails every rank's call with an error naming the
// file, the room needed and free and the remedy (before: the owner of
// the file died of SIGBUS at its first touch past the room); a mailbox
// that does not fit leaves the communicator without one, its calls
// meeting over the bootstrap, and says why with MSCCLGO_NCCL_DEBUG=INFO
// (before: SIGBUS). Root only (mount); internal/shmfile's
// TestNoRoomMessage covers the message where no tmpfs can be mounted.
func TestSmallShm(t *testing.T) {
	plans := shmPlans(t)
	t.Run("host memory", func(t *testing.T) {
		t.Parallel()
		sp, err := privateShm(t, 1<<20)
		if err != nil {
			t.Skipf("no small /dev/shm of the test's own: %v", err)
		}
		outs := startShmJob(t, sp, 2, []string{"MSCCLGO_NCCL_HOSTMEM=1", "MSCCLGO_PLAN_PATH=" + plans, "MSCCLGO_NCCL_TIMEOUT=30s"},
			noPrefix, strconv.Itoa(1<<20), "0").wait(t)
		for r, out := range outs {
			wantIn(t, fmt.Sprintf("rank %d", r), out, fmt.Sprintf("rank %d: ncclAllReduce -> ", r),
				"shared memory: no room in /dev/shm for mscclgo-rank-", "it needs 4.0 MiB (4194496 bytes)", "/dev/shm has ", " free of 1 MiB",
				"docker run --shm-size=", "MSCCLGO_SHM_DIR")
			if strings.Contains(out, "ncclAllReduce -> 0") || strings.Contains(out, "SIGBUS") {
				t.Errorf("rank %d: the call went ahead:\n%s", r, out)
			}
		}
		if left := shmFiles(t, sp.dir); len(left) > 0 {
			t.Errorf("left in /dev/shm: %v", left)
		}
	})
	t.Run("mailbox", func(t *testing.T) {
		t.Parallel()
		sp, err := privateShm(t, 64<<10)
		if err != nil {
			t.Skipf("no small /dev/shm of the test's own: %v", err)
		}
		outs := startShmJob(t, sp, 2, []string{"LD_LIBRARY_PATH=" + filepath.Join(artifacts(t), "emu"), "MSCCLGO_PLAN_PATH=" + plans,
			"MSCCLGO_NCCL_TIMEOUT=30s", "MSCCLGO_NCCL_DEBUG=INFO"}, noPrefix, "4096", "0").wait(t)
		for r, out := range outs {
			wantIn(t, fmt.Sprintf("rank %d", r), out, fmt.Sprintf("rank %d: ncclAllReduce -> 0", r), fmt.Sprintf("rank %d: allreduce right", r))
		}
		wantIn(t, "rank 0", outs[0], "rank 0 of 2: no mailbox, every call meets its peers over the bootstrap: the communicator's mailbox: "+
			"shared memory: no room in /dev/shm for mscclgo-comm-", "it needs 320.1 KiB (327808 bytes), /dev/shm has ", " free of 64 KiB")
		if left := shmFiles(t, sp.dir); len(left) > 0 {
			t.Errorf("left in /dev/shm: %v", left)
		}
	})
}

// TestShmStaleReaped: the session files of a job of two host-memory
// processes SIGKILLed in the session's set-up (the second rank held in
// its file's sizing by strace's fault injection) are removed by the next
// job on the host, and those of a job still running are left alone
// (before: the killed job's files stayed for good). In a /dev/shm of the
// test's own where it can mount one (root), else in a directory that
// MSCCLGO_SHM_DIR names.
func TestShmStaleReaped(t *testing.T) {
	t.Parallel()
	strace, err := exec.LookPath("strace")
	if err != nil {
		t.Skip("strace is not installed: no way to hold a rank inside its set-up")
	}
	sp, err := privateShm(t, 256<<20)
	if err != nil {
		t.Logf("in a directory named by MSCCLGO_SHM_DIR, as no /dev/shm of the test's own can be made: %v", err)
		sp = &shmSpace{dir: t.TempDir()}
		sp.env = []string{"MSCCLGO_SHM_DIR=" + sp.dir}
	}
	plans := shmPlans(t)
	env := []string{"MSCCLGO_NCCL_HOSTMEM=1", "MSCCLGO_PLAN_PATH=" + plans, "MSCCLGO_NCCL_TIMEOUT=60s"}
	held := func(r int) []string {
		if r == 0 {
			return nil
		}
		// Rank 1's first sizing of a file (its session's) takes a minute.
		return []string{strace, "-f", "-qq", "-o", "/dev/null", "-e", "trace=ftruncate,fallocate",
			"-e", "inject=ftruncate,fallocate:delay_exit=60000000:when=1"}
	}
	// start starts a job held in its set-up and returns it once both its
	// ranks' files are there, with their names.
	start := func(before []string) (*shmJob, []string) {
		j := startShmJob(t, sp, 2, env, held, "65536", "0")
		for i := 0; ; i++ {
			var mine []string
			for _, f := range shmFiles(t, sp.dir) {
				if !slices.Contains(before, f) {
					mine = append(mine, f)
				}
			}
			if len(mine) == 2 {
				return j, mine
			}
			if i == 600 {
				t.Fatalf("the held job's files did not appear in %s within 60 s (%v there):\nrank 0:\n%s\nrank 1:\n%s",
					sp.dir, mine, j.outs[0], j.outs[1])
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	killed, stale := start(nil)
	killed.kill()
	if left := shmFiles(t, sp.dir); len(left) != 2 {
		t.Fatalf("after the SIGKILL: %v in %s, want the killed job's 2 files %v", left, sp.dir, stale)
	}
	_, live := start(stale)
	outs := startShmJob(t, sp, 2, env, noPrefix, "65536", "0").wait(t)
	for r, out := range outs {
		wantIn(t, fmt.Sprintf("rank %d", r), out, fmt.Sprintf("rank %d: allreduce right", r))
	}
	left := shmFiles(t, sp.dir)
	t.Logf("in %s: the killed job's %v, the live job's %v; after the next job: %v", sp.dir, stale, live, left)
	for _, f := range stale {
		if slices.Contains(left, f) {
			t.Errorf("the killed job's file %s is still there after the next job", f)
		}
	}
	for _, f := range live {
		if !slices.Contains(left, f) {
			t.Errorf("the live job's file %s was removed", f)
		}
	}
}
