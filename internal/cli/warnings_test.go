package cli

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

// TestEvalWarnings: eval warns, with the .star line, about what the
// MSCCL++ executor cannot run (MSCCL++'s own allreduce example at 16 ranks
// fuses 15 channel ids into one op, past the executor's 8, and 16 operands
// into one reduce), still writes the plan, and with --strict writes none.
func TestEvalWarnings(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	src := ports + "/single_node/allreduce.star"
	code, _, stderr := run(t, dir, "eval", src, "-D", "num_gpus=16", "-o", "$DIR/ar.json")
	if code != 0 {
		t.Fatalf("eval: exit %d: %s", code, stderr)
	}
	for _, want := range []string{
		`(?m)^\S*allreduce\.star:41:18: warning: rlxsignal has 15 channel ids: the MSCCL\+\+ executor reads at most 8 per op \(program "allreduce" rank 0 tb 0 op 1, and 127 more\)$`,
		`(?m)^\S*allreduce\.star:54:50: warning: rres has 16 sources and 16 destinations: the MSCCL\+\+ executor holds at most 10 on a side`,
	} {
		if !regexp.MustCompile(want).MatchString(stderr) {
			t.Errorf("stderr does not match %s:\n%s", want, stderr)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "ar.json")); err != nil {
		t.Errorf("the plan was not written: %v", err)
	}
	code, _, stderr = run(t, dir, "eval", src, "-D", "num_gpus=16", "-o", "$DIR/strict.json", "--strict")
	if code != ExitError || !regexp.MustCompile(`allreduce\.star:41:18: error: rlxsignal has 15 channel ids`).MatchString(stderr) {
		t.Errorf("--strict: exit %d, stderr:\n%s", code, stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "strict.json")); !os.IsNotExist(err) {
		t.Errorf("--strict wrote the plan (stat: %v)", err)
	}
	// Within the limits: no warning.
	if code, _, stderr := run(t, dir, "eval", src, "-D", "num_gpus=8", "-o", "$DIR/ar8.json", "--strict"); code != 0 || stderr != "" {
		t.Errorf("8 ranks: exit %d, stderr %q", code, stderr)
	}
}

// TestEvalWarnsUnpairedChannel: a wait on a rank's third channel to a peer
// that declares two back is named at its line.
func TestEvalWarnsUnpairedChannel(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "unp.star"), `n = 2
CollectiveProgram("unpaired", AllGather(n, 1, True), n, protocol = "Simple")
a = MemoryChannel(1, 0)
b = MemoryChannel(1, 0)
back = MemoryChannel(0, 1)
a.put(Rank(1).get_output_buffer()[0:1], Rank(0).get_output_buffer()[0:1], tb = 0)
b.signal(tb = 0, data_sync = SyncType.before)
back.wait(tb = 0, data_sync = SyncType.after)
c = MemoryChannel(0, 1)
c.put(Rank(0).get_output_buffer()[1:2], Rank(1).get_output_buffer()[1:2], tb = 0)
c.signal(tb = 0, data_sync = SyncType.before)
MemoryChannel(1, 0).wait(tb = 0, data_sync = SyncType.after)
`)
	code, _, stderr := run(t, dir, "eval", "$DIR/unp.star", "-o", "$DIR/unp.json")
	want := `unp\.star:12:25: warning: wait uses memory channel 2 of rank 0 \(to rank 1\), which has no partner: rank 0 declares 3 memory channel\(s\) to rank 1, rank 1 declares 2 back`
	if code != 0 || !regexp.MustCompile(want).MatchString(stderr) {
		t.Errorf("exit %d, stderr:\n%s", code, stderr)
	}
}

// TestEvalStrictRefusesUnpairedPutWithSignal: a put_with_signal through a
// port channel without a partner is what check rejects as unpaired, so
// eval warns about it and --strict writes no plan (found by FuzzEval:
// tests/fuzzfindings/pws_unpaired_port_channel.star).
func TestEvalStrictRefusesUnpairedPutWithSignal(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "pws.star"), `CollectiveProgram("pws", SendRecv(2, 1, False), 2)
a = PortChannel(1, 0)
b = PortChannel(0, 1)
c = PortChannel(1, 0)
c.put_with_signal(Rank(1).get_output_buffer()[0:1], Rank(0).get_input_buffer()[0:1], tb = 0)
b.wait(tb = 0)
`)
	code, _, stderr := run(t, dir, "eval", "$DIR/pws.star", "--strict", "-o", "$DIR/pws.json")
	want := `pws\.star:5:18: error: pws uses port channel 1 of rank 0 \(to rank 1\), which has no partner`
	if code != 1 || !regexp.MustCompile(want).MatchString(stderr) {
		t.Errorf("exit %d, stderr:\n%s", code, stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "pws.json")); err == nil {
		t.Error("--strict wrote the plan")
	}
}
