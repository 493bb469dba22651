package cli

import (
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// checkGPU is a rank that copies input chunk 0 to output chunk 0.
const checkGPU = `{"id": ID, "input_chunks": 1, "output_chunks": 1, "scratch_chunks": 0,
    "threadblocks": [{"id": 0, "ops": [
      {"name": "copy", "src_buff": [{"type": "i", "index": 0, "size": 1}], "dst_buff": [{"type": "o", "index": 0, "size": 1}]}
    ], "channels": []}],
    "channels": CHANNELS, "remote_buffers": []}`

// checkPlan returns a plan of ranks whose channels are given.
func checkPlan(channels ...string) string {
	var gpus []string
	for r, ch := range channels {
		gpus = append(gpus, strings.NewReplacer("ID", strconv.Itoa(r), "CHANNELS", ch).Replace(checkGPU))
	}
	return `{
  "name": "one", "collective": "allreduce", "protocol": "Simple", "inplace": false,
  "gpus": [` + strings.Join(gpus, ",") + `],
  "min_message_size": 1024
}`
}

func TestCheck(t *testing.T) {
	dir := t.TempDir()
	good := checkPlan("[]")
	writeFile(t, filepath.Join(dir, "good.json"), good)
	writeFile(t, filepath.Join(dir, "warn.json"), checkPlan(`[{"channel_type": "memory", "connected_to": [1]}]`, "[]"))
	bad := strings.Replace(strings.Replace(good, `"copy"`, `"glre"`, 1), `"index": 0, "size": 1}], "dst_buff"`, `"index": 0}], "dst_buff"`, 1)
	bad = strings.Replace(bad, `"protocol": "Simple"`, `"protocol": "simple"`, 1)
	writeFile(t, filepath.Join(dir, "bad.json"), bad)
	writeFile(t, filepath.Join(dir, "broken.json"), "{\n")

	tests := []struct {
		name   string
		args   []string
		code   int
		stdout []string // lines, in order
		stderr string   // substring
	}{
		{name: "clean", args: []string{"check", "$DIR/good.json"}, stdout: []string{"$DIR/good.json: ok"}},
		{name: "sizes", args: []string{"check", "$DIR/good.json", "--size", "1K", "--size", "4K,64K"}, stdout: []string{"$DIR/good.json: ok"}},
		{name: "bad size", args: []string{"check", "--size", "1000", "$DIR/good.json"}, code: ExitError, stdout: []string{
			"$DIR/good.json: size 1000: input size 1000: not a multiple of buffer_alignment 16",
		}},
		{name: "size below min", args: []string{"check", "--size", "512", "$DIR/good.json"}, code: ExitError, stdout: []string{
			"$DIR/good.json: size 512: message size 512 (the input size): below min_message_size 1024",
		}},
		{name: "warning", args: []string{"check", "$DIR/warn.json"}, stdout: []string{
			"$DIR/warn.json: warning: gpus[0]: memory channel 0 (to rank 1) is unpaired",
			"$DIR/warn.json: ok",
		}},
		{name: "every problem", args: []string{"check", "$DIR/bad.json", "$DIR/good.json"}, code: ExitError, stdout: []string{
			`$DIR/bad.json: protocol = "simple": want "Simple" or "LL"`,
			`$DIR/bad.json: gpus[0].threadblocks[0].ops[0]: name = "glre": invalid operation type`,
			"$DIR/good.json: ok",
		}},
		{name: "syntax", args: []string{"check", "$DIR/broken.json"}, code: ExitError, stdout: []string{"$DIR/broken.json: unexpected end of input"}},
		{name: "missing file", args: []string{"check", "$DIR/none.json"}, code: ExitError, stdout: []string{"$DIR/none.json: no such file or directory"}},
		{name: "no plan", args: []string{"check"}, code: ExitUsage, stderr: "want at least one PLAN.json"},
		{name: "unparsable size", args: []string{"check", "$DIR/good.json", "--size", "lots"}, code: ExitUsage, stderr: `--size: size "lots"`},
		{name: "unknown flag", args: []string{"check", "--nope", "$DIR/good.json"}, code: ExitUsage},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := run(t, dir, tt.args...)
			if code != tt.code {
				t.Fatalf("exit %d, want %d; stdout:\n%s\nstderr:\n%s", code, tt.code, stdout, stderr)
			}
			lines := strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
			if stdout == "" {
				lines = nil
			}
			if len(lines) != len(tt.stdout) {
				t.Fatalf("stdout has %d lines, want %d:\n%s", len(lines), len(tt.stdout), stdout)
			}
			for i, want := range tt.stdout {
				if want = strings.ReplaceAll(want, "$DIR", dir); !strings.HasPrefix(lines[i], want) {
					t.Errorf("line %d = %q, want prefix %q", i, lines[i], want)
				}
			}
			if !strings.Contains(stderr, tt.stderr) {
				t.Errorf("stderr %q does not contain %q", stderr, tt.stderr)
			}
		})
	}
}
