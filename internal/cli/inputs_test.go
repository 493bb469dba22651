package cli

import (
	"bytes"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/mscclgo/mscclgo/bootstrap"
)

// inputCase feeds one input of the command line a hostile file.
type inputCase struct {
	// input names the input: "CMD --flag", "CMD PLAN" for a positional
	// argument, or "$VAR" for an environment variable.
	input string
	// args is the command line; $IN is replaced by the hostile path.
	args []string
	// env are variables to set; $IN is replaced as in args.
	env map[string]string
	// dir: $IN is a directory holding the hostile file under this name
	// instead of the hostile file itself.
	dir string
	// ext is the hostile file's suffix.
	ext string
}

// outputFlags are the flags whose path-like value is written, not read,
// with where their hostile cases are.
var outputFlags = map[string]string{
	"eval --output":  "output_test.go",
	"model --output": "output_test.go",
	"model --plot":   "output_test.go",
	"trace --output": "output_test.go",
	"view --output":  "output_test.go",
	"install --dir":  "TestInstallDirNotADirectory",
}

// pathFlags lists, from the command definitions, every flag that names a
// file or directory ("CMD --flag") and every command taking a plan or
// script argument ("CMD PLAN").
func pathFlags(t *testing.T) []string {
	t.Helper()
	var d deps
	var out []string
	for _, c := range newApp(&d).Commands {
		if strings.Contains(c.ArgsUsage, ".json") || strings.Contains(c.ArgsUsage, ".star") {
			out = append(out, c.Name+" PLAN")
		}
		for _, f := range c.Flags {
			df, ok := f.(cli.DocGenerationFlag)
			if !ok {
				continue
			}
			usage := df.GetUsage()
			placeholder := ""
			if _, rest, ok := strings.Cut(usage, "`"); ok {
				placeholder, _, _ = strings.Cut(rest, "`")
			}
			if strings.Contains(placeholder, "FILE") || strings.Contains(placeholder, "DIR") ||
				placeholder == "OUT" || placeholder == "RESULTS" || strings.Contains(usage, " file") {
				out = append(out, c.Name+" --"+f.Names()[0])
			}
		}
	}
	return out
}

// TestEveryInput feeds every input the command line reads, flags and
// environment variables, a FIFO nobody writes, /dev/zero and a symbolic
// link loop, and expects a named error at once, never a hang or a read
// without end.
func TestEveryInput(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("MSCCLGO_CACHE_DIR", filepath.Join(dir, "cache"))
	ar := filepath.Join(dir, "ar.json")
	a2av := filepath.Join(dir, "a2av.json")
	for _, args := range [][]string{
		{"eval", "allreduce_packet", "-D", "world_size=2", "-o", ar},
		{"eval", "alltoallv", "-D", "world_size=2", "-o", a2av},
	} {
		if code, _, stderr := run(t, dir, args...); code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, stderr)
		}
	}
	plans := filepath.Join(dir, "plans")
	if err := os.Mkdir(plans, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(ar, filepath.Join(plans, "ar.json")); err != nil {
		t.Fatal(err)
	}
	// The rendezvous file rank 1 of a two-rank job reads.
	rdzvEnv := map[string]string{
		bootstrap.EnvRank: "1", bootstrap.EnvWorldSize: "2", bootstrap.EnvJobID: "inputs-test",
		bootstrap.EnvRendezvousDir: dir,
	}
	w, _, err := bootstrap.FromEnv(func(k string) string { return rdzvEnv[k] })
	if err != nil {
		t.Fatal(err)
	}
	rdzvCase := maps.Clone(rdzvEnv)
	rdzvCase[bootstrap.EnvRendezvousDir] = "$IN"
	// select searches the --plans directories first; the default set
	// (--dir) is not installed.
	selectArgs := []string{"select", "-c", "allreduce", "-n", "2", "--size", "1K", "--dir", filepath.Join(dir, "none")}
	cases := []inputCase{
		{input: "eval PLAN", args: []string{"eval", "$IN"}, ext: ".star"},
		{input: "check PLAN", args: []string{"check", "$IN"}, ext: ".json"},
		{input: "run PLAN", args: []string{"run", "$IN", "--size", "1K"}, ext: ".json"},
		{input: "model PLAN", args: []string{"model", "$IN", "--size", "1K"}, ext: ".json"},
		{input: "trace PLAN", args: []string{"trace", "$IN"}, ext: ".json"},
		{input: "view PLAN", args: []string{"view", "$IN"}, ext: ".json"},
		{input: "check PLAN source map", args: []string{"check", ar}, dir: "ar.json.map"},
		{input: "run --counts", args: []string{"run", a2av, "--counts", "$IN"}, ext: ".txt"},
		{input: "model --counts", args: []string{"model", a2av, "--counts", "$IN"}, ext: ".txt"},
		{input: "model --hw", args: []string{"model", ar, "--size", "1K", "--hw", "$IN"}, ext: ".json"},
		{input: "model --fit", args: []string{"model", ar, "--fit", "$IN"}, ext: ".txt"},
		{input: "trace --hw", args: []string{"trace", ar, "--hw", "$IN"}, ext: ".json"},
		{input: "select --hw", args: append(slices.Clone(selectArgs), "--plans", plans, "--hw", "$IN"), ext: ".json"},
		{input: "view --hw", args: []string{"view", ar, "--hw", "$IN"}, ext: ".json"},
		{input: "install --hw", args: []string{"install", "--dir", filepath.Join(dir, "set"), "--hw", "$IN"}, ext: ".json"},
		{input: "synth --topo", args: []string{"synth", "allgather", "--topo", "$IN", "--hw", "v100-sxm2"}, ext: ".txt"},
		{input: "synth --hw", args: []string{"synth", "allgather", "--topo", "dgx1-v100", "--hw", "$IN"}, ext: ".json"},
		{input: "model --topo", args: []string{"model", ar, "--size", "1K", "--topo", "$IN", "--hw", "v100-sxm2"}, ext: ".txt"},
		{input: "install --topo", args: []string{"install", "--dir", filepath.Join(dir, "set"), "--topo", "$IN", "--hw", "v100-sxm2"}, ext: ".txt"},
		{input: "select --plans", args: append(slices.Clone(selectArgs), "--plans", "$IN"), dir: "index.json"},
		{input: "select --plans", args: append(slices.Clone(selectArgs), "--plans", "$IN"), dir: "x.json"},
		{input: "select --dir", args: []string{"select", "-c", "allreduce", "-n", "2", "--size", "1K", "--dir", "$IN"}, dir: "index.json"},
		{input: "$MSCCLGO_PLAN_PATH", args: selectArgs, env: map[string]string{"MSCCLGO_PLAN_PATH": "$IN"}, dir: "index.json"},
		{input: "$MSCCLGO_CACHE_DIR", args: []string{"select", "-c", "allreduce", "-n", "2", "--size", "1K"},
			env: map[string]string{"MSCCLGO_CACHE_DIR": "$IN"}, dir: "default/index.json"},
		{input: "$" + bootstrap.EnvRendezvousDir, args: []string{"run", ar, "--size", "1K", "--join-timeout", "1m"},
			env: rdzvCase, dir: filepath.Base(w.RendezvousFile)},
	}

	// Every path flag of the command definitions has a case or is an
	// output tested elsewhere.
	covered := map[string]bool{}
	for _, c := range cases {
		covered[strings.TrimSuffix(c.input, " source map")] = true
	}
	for _, f := range pathFlags(t) {
		if !covered[f] && outputFlags[f] == "" {
			t.Errorf("%s names a file: add a case to TestEveryInput (or to outputFlags if it is written)", f)
		}
	}

	hostile := []struct {
		name string
		make func(path string) error
		want string
	}{
		{"fifo", func(p string) error { return syscall.Mkfifo(p, 0o600) }, "is a FIFO, not a regular file"},
		{"dev-zero", func(p string) error { return os.Symlink("/dev/zero", p) }, "is a device, not a regular file"},
		{"link-loop", func(p string) error { return os.Symlink(filepath.Base(p), p) }, "a loop of symbolic links"},
	}
	for i, c := range cases {
		for _, h := range hostile {
			t.Run(fmt.Sprintf("%s/%d/%s", c.input, i, h.name), func(t *testing.T) {
				sub := t.TempDir()
				in := filepath.Join(sub, "input"+c.ext)
				target := in
				if c.dir != "" {
					in = sub
					if c.dir == "ar.json.map" {
						// The source map beside the plan.
						in = ar
					}
					target = filepath.Join(sub, c.dir)
					if c.dir == "ar.json.map" {
						target = ar + ".map"
						t.Cleanup(func() { os.Remove(target) })
					}
					if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
						t.Fatal(err)
					}
				}
				if err := h.make(target); err != nil {
					t.Skipf("cannot make a %s here: %v", h.name, err)
				}
				for k, v := range c.env {
					t.Setenv(k, strings.ReplaceAll(v, "$IN", in))
				}
				args := make([]string, len(c.args))
				for j, a := range c.args {
					args[j] = strings.ReplaceAll(a, "$IN", in)
				}
				code, stdout, stderr := runBounded(t, dir, 20*time.Second, args...)
				out := stderr + stdout
				if c.dir == "ar.json.map" {
					// An unusable source map is a note: the plan
					// is still checked.
					if !strings.Contains(out, filepath.Base(target)) || !strings.Contains(out, h.want) {
						t.Errorf("exit %d; output lacks a note naming %s and %q:\n%s", code, target, h.want, out)
					}
					return
				}
				if code != ExitError && code != ExitUsage {
					t.Errorf("exit %d, want 1 or 2", code)
				}
				if !strings.Contains(out, filepath.Base(target)) || !strings.Contains(out, h.want) {
					t.Errorf("output lacks %s and %q:\n%s", filepath.Base(target), h.want, out)
				}
			})
		}
	}
}

// runBounded runs the CLI in process as run does, failing the test when
// it has not returned within limit (a read that blocks).
func runBounded(t *testing.T, dir string, limit time.Duration, args ...string) (int, string, string) {
	t.Helper()
	type result struct {
		code           int
		stdout, stderr string
	}
	done := make(chan result, 1)
	go func() {
		var stdout, stderr bytes.Buffer
		code := Run(append([]string{"mscclgo"}, args...), strings.NewReader(""), &stdout, &stderr)
		done <- result{code, stdout.String(), stderr.String()}
	}()
	select {
	case r := <-done:
		return r.code, r.stdout, r.stderr
	case <-time.After(limit):
		t.Fatalf("mscclgo %s: still running after %v (blocked on an input?)", strings.Join(args, " "), limit)
		return 0, "", ""
	}
}
