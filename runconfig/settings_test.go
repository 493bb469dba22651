package runconfig

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/mscclgo/mscclgo/executor/fabric"
	"github.com/mscclgo/mscclgo/gpu"
)

// TestGPUConfigSetsEveryField: GPUConfig is where every field of
// gpu.Config is set; a field added to gpu.Config without a setting here
// fails this test.
func TestGPUConfigSetsEveryField(t *testing.T) {
	t.Parallel()
	s := Settings{SetupTimeout: time.Second, ReplayTimeout: time.Minute, Threads: 64, MaxSessions: 3, MeetEveryCall: true, Graph: true}
	d := Device{Name: "gpu-emu",
		Open:       func() (gpu.Driver, error) { return nil, nil },
		Devices:    func() (int, error) { return 2, nil },
		OpenDevice: func(int) (gpu.Driver, error) { return nil, nil }}
	c := s.GPUConfig(d)
	v := reflect.ValueOf(c)
	for i := range v.NumField() {
		if v.Field(i).IsZero() {
			t.Errorf("GPUConfig left gpu.Config.%s zero", v.Type().Field(i).Name)
		}
	}
	if c.Threads != 64 || c.MaxSessions != 3 || c.SetupTimeout != time.Second || c.ReplayTimeout != time.Minute || c.Name != "gpu-emu" {
		t.Errorf("GPUConfig = %+v", c)
	}
	if got := (Settings{Threads: -3}).GPUConfig(d).Threads; got != 0 {
		t.Errorf("threads -3: Config.Threads %d, want 0 (the default)", got)
	}
}

// env is a getenv over a map.
func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

// TestFromEnv: the library's variables, their defaults, and the errors
// that name a malformed one.
func TestFromEnv(t *testing.T) {
	t.Parallel()
	defaults := Settings{Transport: fabric.Auto, SetupTimeout: DefaultSetupTimeout, SetupBound: TimeoutEnv,
		HelloTimeout: fabric.DefaultAutoHelloTimeout, HelloBound: HelloTimeoutEnv, ReplayTimeout: DefaultReplayTimeout,
		MaxSessions: gpu.DefaultMaxSessions}
	tests := []struct {
		name    string
		env     map[string]string
		want    func(s *Settings)
		wantErr string
	}{
		{name: "unset", want: func(*Settings) {}},
		{name: "threads", env: map[string]string{ThreadsEnv: "4"}, want: func(s *Settings) { s.Threads = 4 }},
		{name: "threads malformed", env: map[string]string{ThreadsEnv: "four"}, want: func(*Settings) {}},
		{name: "threads negative", env: map[string]string{ThreadsEnv: "-3"}, want: func(*Settings) {}},
		{name: "tcp", env: map[string]string{fabric.TransportVar: "tcp", HelloTimeoutEnv: "bad"},
			want: func(s *Settings) { s.Transport, s.HelloTimeout, s.HelloBound = fabric.TCP, 0, "" }},
		{name: "timeouts", env: map[string]string{TimeoutEnv: "30", ReplayTimeoutEnv: "1m", HelloTimeoutEnv: "2s"},
			want: func(s *Settings) {
				s.SetupTimeout, s.ReplayTimeout, s.HelloTimeout = 30*time.Second, time.Minute, 2*time.Second
			}},
		{name: "sessions", env: map[string]string{MaxSessionsEnv: "7", MeetEveryCallEnv: "1"},
			want: func(s *Settings) { s.MaxSessions, s.MeetEveryCall = 7, true }},
		{name: "bad timeout", env: map[string]string{TimeoutEnv: "soon"}, wantErr: `MSCCLGO_NCCL_TIMEOUT="soon": not a duration`},
		{name: "bad replay", env: map[string]string{ReplayTimeoutEnv: "0"}, wantErr: `MSCCLGO_NCCL_REPLAY_TIMEOUT="0": 0s is outside 1ms to 24h0m0s`},
		{name: "bad sessions", env: map[string]string{MaxSessionsEnv: "0"}, wantErr: `MSCCLGO_NCCL_MAX_SESSIONS="0": want a number of plan instances`},
		{name: "bad hello under auto", env: map[string]string{HelloTimeoutEnv: "2d"}, wantErr: `MSCCLGO_FABRIC_HELLO_TIMEOUT="2d": not a duration`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := FromEnv(env(tt.env))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("FromEnv: %v, want an error with %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := defaults
			tt.want(&want)
			if got != want {
				t.Errorf("FromEnv =\n%+v, want\n%+v", got, want)
			}
		})
	}
}

// TestCheckTransport: the transports OpenTransport takes, and the
// SettingErrors of those it refuses before opening anything.
func TestCheckTransport(t *testing.T) {
	t.Parallel()
	tests := []struct {
		s       Settings
		want    fabric.Transport
		setting string
	}{
		{s: Settings{Transport: "tcp"}, want: fabric.TCP},
		{s: Settings{Transport: "fabric"}, want: fabric.Fabric},
		{s: Settings{Transport: "auto", HelloTimeout: time.Second}, want: fabric.Auto},
		{s: Settings{Transport: "auto"}, setting: SettingHelloTimeout},
		{s: Settings{Transport: "udp"}, setting: SettingTransport},
		{s: Settings{}, setting: SettingTransport},
	}
	for _, tt := range tests {
		got, err := tt.s.CheckTransport()
		var se *SettingError
		switch {
		case tt.setting == "" && (err != nil || got != tt.want):
			t.Errorf("%+v: %q, %v; want %q", tt.s, got, err, tt.want)
		case tt.setting != "" && (!errors.As(err, &se) || se.Setting != tt.setting):
			t.Errorf("%+v: %v, want a SettingError of %s", tt.s, err, tt.setting)
		}
		if tt.setting != "" {
			if _, err := tt.s.OpenTransport(t.Context(), nil); !errors.As(err, &se) {
				t.Errorf("%+v: OpenTransport: %v, want the SettingError before opening", tt.s, err)
			}
		}
	}
}

// TestOpenTransportTCP: over tcp the carrier is the bootstrap itself,
// with nothing to close.
func TestOpenTransportTCP(t *testing.T) {
	t.Parallel()
	c, err := Settings{Transport: fabric.TCP}.OpenTransport(t.Context(), nil)
	if err != nil || c.Wire != nil || c.Refused != nil {
		t.Fatalf("tcp: %+v, %v", c, err)
	}
	if err := c.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
}
