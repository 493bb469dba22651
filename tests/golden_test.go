// Package tests holds the end-to-end corpora: the ports of the MSCCL++
// reference programs (ports/), compared byte for byte with the reference
// plans of ../shared/golden, and the project's own golden plans
// (testdata/ and ports/, each FILE.star beside FILE.plan.json, rewritten
// with -update).
package tests

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mscclgo/mscclgo/starlib"
)

var update = flag.Bool("update", false, "rewrite the project's golden plans")

// sharedGolden is where the reference plans live, relative to this package.
const sharedGolden = "../../shared/golden"

// refPrefix is the prefix of MANIFEST source scripts; the rest of the path
// names the port under ports/.
const refPrefix = "python/mscclpp/language/tests/"

// portPath maps a reference script to its port.
func portPath(script string) string {
	return filepath.Join("ports", filepath.FromSlash(strings.TrimSuffix(strings.TrimPrefix(script, refPrefix), ".py")+".star"))
}

// argsToDefines maps "--name allgather --num_gpus 8" to -D values.
func argsToDefines(t *testing.T, args string) map[string]string {
	t.Helper()
	out := map[string]string{}
	f := strings.Fields(args)
	for i := 0; i < len(f); i += 2 {
		if !strings.HasPrefix(f[i], "--") || i+1 >= len(f) {
			t.Fatalf("cannot parse reference arguments %q", args)
		}
		out[strings.TrimPrefix(f[i], "--")] = f[i+1]
	}
	return out
}

// evalPlans evaluates a script and returns the concatenated plans of its
// programs.
func evalPlans(path string, defines map[string]string) ([]byte, error) {
	res, err := starlib.Eval(starlib.DirSource(filepath.Dir(path)), filepath.Base(path), starlib.Options{Defines: defines})
	if err != nil {
		return nil, err
	}
	if len(res.Programs) == 0 {
		return nil, errors.New("script creates no program")
	}
	var all bytes.Buffer
	for _, p := range res.Programs {
		plan, err := p.Plan()
		if err != nil {
			return nil, err
		}
		all.Write(plan)
	}
	return all.Bytes(), nil
}

// readTSV returns the rows of a tab-separated file after its header.
func readTSV(t *testing.T, path string) [][]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var rows [][]string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for first := true; sc.Scan(); first = false {
		if !first && sc.Text() != "" {
			rows = append(rows, strings.Split(sc.Text(), "\t"))
		}
	}
	return rows
}

func sharedAvailable(t *testing.T) {
	t.Helper()
	if _, err := os.Stat(filepath.Join(sharedGolden, "MANIFEST.tsv")); err != nil {
		t.Skipf("reference plans not found at %s (they come with the project's shared/ directory): skipping the byte-for-byte comparison", sharedGolden)
	}
}

// TestReferencePlans compares every reference plan of MANIFEST.tsv with the
// plan of its port, byte for byte.
func TestReferencePlans(t *testing.T) {
	t.Parallel()
	sharedAvailable(t)
	for _, row := range readTSV(t, filepath.Join(sharedGolden, "MANIFEST.tsv")) {
		file, script, args := row[0], row[1], row[2]
		t.Run(strings.TrimSuffix(file, ".json"), func(t *testing.T) {
			t.Parallel()
			want, err := os.ReadFile(filepath.Join(sharedGolden, file))
			if err != nil {
				t.Fatal(err)
			}
			got, err := evalPlans(portPath(script), argsToDefines(t, args))
			if err != nil {
				t.Fatalf("%s %s: %v", portPath(script), args, detail(err))
			}
			if !bytes.Equal(want, got) {
				t.Errorf("%s %s differs from %s (-want +got):\n%s", portPath(script), args, file, lineDiff(want, got))
			}
		})
	}
}

// TestReferenceRejections checks that the ports of reference scripts that
// fail for a DSL rule fail the same way. Scripts that fail only because
// they use a removed API have no port.
func TestReferenceRejections(t *testing.T) {
	t.Parallel()
	sharedAvailable(t)
	// When several rank pairs mismatch, which one the reference reports
	// depends on Python's hash seed, so the ranks are not compared.
	rules := []struct {
		ref  *regexp.Regexp // the reference's error
		want string         // a regexp template for mscclgo's error
	}{
		{regexp.MustCompile(`^RuntimeError: Signal/Wait mismatch on (\w+): rank \d+ issues (\d+) signal\(s\) to rank \d+, but rank \d+ performs (\d+) wait`),
			`signal/wait mismatch on $1: rank \d+ issues $2 signal\(s\) to rank \d+, but rank \d+ performs $3 wait\(s\)`},
		{regexp.MustCompile(`^RuntimeError: Minimum message size (\d+) is too small for the number of instances (\d+)\. The minimum message size must be at least (\d+)`),
			`minimum message size $1 is too small for $2 instances: it must be at least $3`},
	}
	for i, row := range readTSV(t, filepath.Join(sharedGolden, "REJECTED.tsv")) {
		script, args, refErr := row[0], row[1], row[2]
		var want string
		for _, r := range rules {
			if m := r.ref.FindStringSubmatchIndex(refErr); m != nil {
				want = string(r.ref.ExpandString(nil, r.want, refErr, m))
			}
		}
		if want == "" {
			continue // removed API: nothing to port
		}
		t.Run(fmt.Sprintf("%s/%d", filepath.Base(script), i), func(t *testing.T) {
			t.Parallel()
			_, err := evalPlans(portPath(script), argsToDefines(t, args))
			if err == nil {
				t.Fatalf("%s %s: evaluation succeeded, want the reference's error %q", portPath(script), args, refErr)
			}
			if !regexp.MustCompile(want).MatchString(err.Error()) {
				t.Errorf("%s %s: got error %q, want it to match %q", portPath(script), args, err, want)
			}
		})
	}
}

// wantErrRE finds a "# want-error: REGEXP" line in a golden corpus script.
var wantErrRE = regexp.MustCompile(`(?m)^# want-error: (.*)$`)

// TestGoldenPlans evaluates every .star of testdata/ and ports/ with its
// default parameters and compares the plans with FILE.plan.json (or, for
// scripts marked "# want-error: REGEXP", the error).
func TestGoldenPlans(t *testing.T) {
	t.Parallel()
	var scripts []string
	for _, root := range []string{"testdata", "ports"} {
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() && strings.HasSuffix(path, ".star") && !strings.Contains(path, string(filepath.Separator)+"lib"+string(filepath.Separator)) {
				scripts = append(scripts, path)
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(scripts) == 0 {
		t.Fatal("no golden scripts found")
	}
	for _, path := range scripts {
		t.Run(filepath.ToSlash(path), func(t *testing.T) {
			t.Parallel()
			src, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			got, err := evalPlans(path, nil)
			if m := wantErrRE.FindSubmatch(src); m != nil {
				if err == nil {
					t.Fatalf("evaluation succeeded, want an error matching %q", m[1])
				}
				if !regexp.MustCompile(string(m[1])).MatchString(detail(err)) {
					t.Fatalf("got error:\n%s\nwant it to match %q", detail(err), m[1])
				}
				return
			}
			if err != nil {
				t.Fatal(detail(err))
			}
			golden := strings.TrimSuffix(path, ".star") + ".plan.json"
			if *update {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test ./tests -update to create it)", err)
			}
			if !bytes.Equal(want, got) {
				t.Errorf("plan differs from %s (-want +got):\n%s", golden, lineDiff(want, got))
			}
		})
	}
}

// detail returns an evaluation error with its traceback.
func detail(err error) string {
	var se *starlib.Error
	if errors.As(err, &se) {
		return se.Detail()
	}
	return err.Error()
}

// lineDiff diffs two texts line by line, truncated to keep failures short.
func lineDiff(want, got []byte) string {
	d := cmp.Diff(strings.Split(string(want), "\n"), strings.Split(string(got), "\n"))
	if len(d) > 4000 {
		d = d[:4000] + "\n...(truncated)"
	}
	return d
}
