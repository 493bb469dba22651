package gpu

import "testing"

// TestSettingsFromEnv: the library's threads setting, with what an unset
// or malformed variable and a negative value mean.
func TestSettingsFromEnv(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		env     string
		threads int // Config.Threads
	}{
		{"", 0},
		{"4", 4},
		{"512", 512},
		{"four", 0},
		{"-3", 0},
	} {
		s := SettingsFromEnv(func(k string) string {
			if k != ThreadsEnv {
				t.Errorf("SettingsFromEnv read %s", k)
			}
			return tt.env
		})
		c := NewConfig("gpu-emu", nil, s)
		if c.Threads != tt.threads || c.Name != "gpu-emu" {
			t.Errorf("%s=%q: %+v, want threads %d", ThreadsEnv, tt.env, c, tt.threads)
		}
	}
}
