package cli

import (
	"html"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestViewDeadlock checks view of a plan that deadlocks: the page is
// written, with the blocked ops in its data and their .star lines, the
// deadlock is reported, and the exit status is the deadlock's.
func TestViewDeadlock(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "algo.star"), `CollectiveProgram("allgather_deadlock", AllGather(2, 1, True), 2, protocol = "Simple")
for r in range(2):
    peer = 1 - r
    MemoryChannel(r, peer).wait(tb = 0, data_sync = SyncType.after)
    MemoryChannel(peer, r).put(Rank(peer).get_output_buffer()[r:r + 1], Rank(r).get_output_buffer()[r:r + 1], tb = 0)
    MemoryChannel(peer, r).signal(tb = 0, data_sync = SyncType.before)
`)
	code, stdout, stderr := run(t, dir, "view", "$DIR/algo.star", "-s", "4K", "-o", "$DIR/plan.html")
	if code != ExitDeadlock || stdout != "" {
		t.Fatalf("exit %d (want %d), stdout %q, stderr:\n%s", code, ExitDeadlock, stdout, stderr)
	}
	for _, want := range []string{"the cost model finds a deadlock", "deadlock: 2 thread block(s) blocked", "wait (" + dir + "/algo.star:4:32)"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr does not say %q:\n%s", want, stderr)
		}
	}
	page, err := os.ReadFile(filepath.Join(dir, "plan.html"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"cat":"blocked"`, `algo.star:4:32`, "DEADLOCK after"} {
		if !strings.Contains(string(page), want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	// The page leads with the diagnosis the terminal printed: the
	// report, whole, before the pictures.
	m := regexp.MustCompile(`(?s)<pre id="diagnosis">(.*?)</pre>`).FindSubmatchIndex(page)
	if m == nil {
		t.Fatalf("the page has no diagnosis")
	}
	diag := html.UnescapeString(string(page[m[2]:m[3]]))
	if !strings.HasPrefix(diag, "mscclgo: "+dir+"/algo.star: size 4096: deadlock: 2 thread block(s) blocked") || !strings.Contains(stderr, diag) || !strings.Contains(diag, "algo.star:4:32") {
		t.Errorf("the page's diagnosis is not the terminal's report:\n%s\nstderr:\n%s", diag, stderr)
	}
	if at := strings.Index(string(page), `id="chunkflow"`); at < m[0] {
		t.Errorf("the diagnosis (at byte %d) comes after the chunk flow (at byte %d)", m[0], at)
	}
}

// TestViewCurveNoteOnce checks that the sizes the busbw curve skips are
// noted on one line.
func TestViewCurveNoteOnce(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	code, _, stderr := run(t, dir, "view", "allreduce_packet", "-D", "world_size=2", "-s", "64K", "-o", "$DIR/plan.html")
	if code != ExitOK {
		t.Fatalf("exit %d:\n%s", code, stderr)
	}
	if n := strings.Count(stderr, "busbw curve"); n != 1 || !strings.Contains(stderr, "5 sizes skipped, 4 MiB to 1 GiB; the first because message size 4194304") {
		t.Errorf("%d busbw curve notes, want one line naming the range:\n%s", n, stderr)
	}
}
