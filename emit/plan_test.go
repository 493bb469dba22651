package emit

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mscclgo/mscclgo/ir"
)

// goldenDir holds the reference plans printed by the MSCCL++ Python DSL.
const goldenDir = "../../shared/golden"

// planFiles returns the reference plans and the worked examples of
// docs/plan-format.md §12 (testdata), skipping the test when the golden directory
// is absent.
func planFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("testdata/*.json")
	if err != nil {
		t.Fatal(err)
	}
	golden, err := filepath.Glob(filepath.Join(goldenDir, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(golden) == 0 {
		t.Skipf("no reference plans in %s", goldenDir)
	}
	return append(files, golden...)
}

func TestDecodeEncodeFixedPoint(t *testing.T) {
	t.Parallel()
	for _, file := range planFiles(t) {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".json"), func(t *testing.T) {
			t.Parallel()
			want, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			p, err := Decode(want)
			if err != nil {
				t.Fatal(err)
			}
			got := p.Encode()
			if !bytes.Equal(want, got) {
				t.Errorf("decode→encode is not a fixed point (-want +got):\n%s", cmp.Diff(string(want), string(got)))
			}
		})
	}
}

// TestFormattersAgree checks the writer against the encoding/json-based
// Plan formatter on programs that use every op kind and odd strings.
func TestFormattersAgree(t *testing.T) {
	t.Parallel()
	odd := synthetic(3, 2, 9)
	odd.Name = "odd \"name\" \\ \t\x00\x7f\u00e9\u2028\U0001F600 </script> & /"
	odd.MinMessageSize = bigInt("-7")
	odd.MaxMessageSize = bigInt("123456789012345678901234567890")
	ops := odd.GPUs[0].ThreadBlocks[0]
	ops.Ops = append(ops.Ops, ex3Program().GPUs[0].ThreadBlocks[0].Ops...)
	tests := []struct {
		name string
		p    *ir.Program
	}{
		{"synthetic", synthetic(4, 3, 17)},
		{"odd", odd},
		{"ex3", ex3Program()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			want, err := Marshal(tt.p)
			if err != nil {
				t.Fatal(err)
			}
			plan, err := Decode(want)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(string(want), string(plan.Encode())); diff != "" {
				t.Errorf("Plan.Encode differs from Marshal (-Marshal +Encode):\n%s", diff)
			}
		})
	}
}

func TestDecodeErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in, want string
	}{
		{"unknown top-level key", `{"name":"x","extra":1}`, `unknown field "extra"`},
		{"unknown op key", `{"gpus":[{"threadblocks":[{"ops":[{"name":"nop","bogus":[]}]}]}]}`, `unknown field "bogus"`},
		{"trailing data", `{"name":"x"} {}`, "data after the plan object"},
		{"not an object", `[]`, "cannot unmarshal array"},
		{"truncated", `{"name":`, "unexpected EOF"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Decode([]byte(tt.in))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Decode(%s) error = %v, want it to contain %q", tt.in, err, tt.want)
			}
		})
	}
}

// TestEncodeCanonicalises checks that Encode imposes the reference layout
// and key order on input that lacks them, so the fixed-point test above
// would notice a reference plan that differs from it.
func TestEncodeCanonicalises(t *testing.T) {
	t.Parallel()
	in := `{"collective":"test","name":"x","protocol":"Simple","inplace":false,"reuse_resources":false,` +
		`"gpus":[{"id":0,"input_chunks":1,"output_chunks":1,"scratch_chunks":0,"threadblocks":[{"id":0,"ops":[` +
		`{"channel_type":"memory","name":"put","dst_buff":[{"size":1,"index":0,"buffer_id":0}],"src_buff":[{"type":"i","index":0,"size":1}]}],` +
		`"channels":[],"remote_buffer_refs":[]}],"channels":[],"remote_buffers":[],"semaphores":[]}],` +
		`"num_threads_per_block":1024,"use_double_scratch_buffer":false,"buffer_alignment":16,"min_message_size":0,"max_message_size":18446744073709551615}`
	p, err := Decode([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	want := `{
  "name": "x",
  "collective": "test",
  "protocol": "Simple",
  "inplace": false,
  "reuse_resources": false,
  "gpus": [
    {
      "id": 0,
      "input_chunks": 1,
      "output_chunks": 1,
      "scratch_chunks": 0,
      "threadblocks": [
        {
          "id": 0,
          "ops": [
            {
              "name": "put",
              "src_buff": [
                {
                  "type": "i",
                  "index": 0,
                  "size": 1
                }
              ],
              "dst_buff": [
                {
                  "buffer_id": 0,
                  "index": 0,
                  "size": 1
                }
              ],
              "channel_type": "memory"
            }
          ],
          "channels": [],
          "remote_buffer_refs": []
        }
      ],
      "channels": [],
      "remote_buffers": [],
      "semaphores": []
    }
  ],
  "num_threads_per_block": 1024,
  "use_double_scratch_buffer": false,
  "buffer_alignment": 16,
  "min_message_size": 0,
  "max_message_size": 18446744073709551615
}
`
	if diff := cmp.Diff(want, string(p.Encode())); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
