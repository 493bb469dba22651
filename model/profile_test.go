// This file tests the hardware profiles: the bundled ones load and say
// where every value comes from; bad files get errors naming the field.

package model_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mscclgo/mscclgo/model"
)

func TestBundledProfiles(t *testing.T) {
	if diff := cmp.Diff([]string{"a100-sxm", "h100-sxm", "h200-sxm"}, model.Profiles()); diff != "" {
		t.Errorf("bundled profiles (-want +got):\n%s", diff)
	}
	for _, tt := range []struct {
		name          string
		nvls          bool
		nvlink, nicGB float64
	}{
		{"h100-sxm", true, 450, 50},
		{"h200-sxm", true, 450, 50},
		{"a100-sxm", false, 300, 25},
	} {
		hw, err := model.LoadProfile(tt.name)
		if err != nil {
			t.Fatal(err)
		}
		got := []any{hw.Name, hw.GPUsPerNode, hw.NVLS, hw.Params.NVLinkGBps.Value, hw.Params.NICGBps.Value}
		want := []any{tt.name, 8, tt.nvls, tt.nvlink, tt.nicGB}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tt.name, diff)
		}
		// A marshalled profile reads back the same.
		data, err := hw.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		back, err := model.ParseProfile("copy", data)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(hw, back); diff != "" {
			t.Errorf("%s round trip (-want +got):\n%s", tt.name, diff)
		}
	}
}

func TestProfileErrors(t *testing.T) {
	hw, err := model.LoadProfile("h100-sxm")
	if err != nil {
		t.Fatal(err)
	}
	good, err := hw.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	// edit returns the profile's JSON with f applied to its map form.
	edit := func(f func(m map[string]any)) string {
		var m map[string]any
		if err := json.Unmarshal(good, &m); err != nil {
			t.Fatal(err)
		}
		f(m)
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	param := func(m map[string]any, name string) map[string]any {
		return m["params"].(map[string]any)[name].(map[string]any)
	}
	tests := []struct {
		name, data, want string
	}{
		{"missing parameter", edit(func(m map[string]any) { delete(m["params"].(map[string]any), "op_us") }), "f.json: field params.op_us: missing"},
		{"unknown field", edit(func(m map[string]any) { m["nvlink"] = 1 }), `f.json: json: unknown field "nvlink"`},
		{"negative", edit(func(m map[string]any) { param(m, "launch_us")["value"] = -1 }), "f.json: field params.launch_us.value: -1, want a finite value ≥ 0"},
		{"fraction above 1", edit(func(m map[string]any) { param(m, "nvlink_efficiency")["value"] = 1.5 }), "f.json: field params.nvlink_efficiency.value: 1.5, want a fraction in (0, 1]"},
		{"zero bandwidth", edit(func(m map[string]any) { param(m, "nvlink_gbps")["value"] = 0 }), "f.json: field params.nvlink_gbps.value: 0, want a value above 0"},
		{"no source", edit(func(m map[string]any) { param(m, "hbm_gbps")["source"] = " " }), "f.json: field params.hbm_gbps.source: missing; say where the value comes from"},
		{"no name", edit(func(m map[string]any) { m["name"] = "" }), "f.json: field name: missing"},
		{"bad gpus_per_node", edit(func(m map[string]any) { m["gpus_per_node"] = 0 }), "f.json: field gpus_per_node: 0, want at least 1"},
		{"sm without arch", edit(func(m map[string]any) { m["sm"].(map[string]any)["arch"] = "" }), "f.json: field sm.arch: missing"},
		{"sm zero clock", edit(func(m map[string]any) { m["sm"].(map[string]any)["clock_mhz"].(map[string]any)["value"] = 0 }), "f.json: field sm.clock_mhz.value: 0, want a finite value above 0"},
		{"sm no source", edit(func(m map[string]any) { m["sm"].(map[string]any)["issue_per_cycle"].(map[string]any)["source"] = "" }), "f.json: field sm.issue_per_cycle.source: missing"},
		{"wrong type", "{\n\"name\": 3}", "f.json: line 2: field name: json: cannot unmarshal number"},
		{"syntax", "{\n\n,", "f.json: line 3: invalid character ','"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeFile(t, "f.json", tt.data)
			_, err := model.LoadProfile(path)
			if err == nil {
				t.Fatal("no error")
			}
			got := strings.Replace(err.Error(), path, "f.json", 1)
			if !strings.HasPrefix(got, tt.want) {
				t.Errorf("error %q, want it to start with %q", got, tt.want)
			}
		})
	}
	if _, err := model.LoadProfile("h200"); err == nil || !strings.Contains(err.Error(), `hardware profile "h200": unknown (bundled: a100-sxm, h100-sxm`) {
		t.Errorf("unknown name: %v", err)
	}
}
