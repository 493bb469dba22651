package runconfig

// settings.go: the Settings type and the gpu.Config it makes.

import (
	"time"

	"github.com/mscclgo/mscclgo/executor/fabric"
	"github.com/mscclgo/mscclgo/gpu"
)

// Settings are what a program chooses of its run time: from its flags
// (mscclgo run: --transport, --join-timeout, --fabric-hello-timeout,
// --threads) or from the environment (FromEnv: the library's variables).
// The zero value is the defaults of every field but Transport, which
// FromEnv and the command line set (auto unless told otherwise).
type Settings struct {
	// Transport carries a job's port channels between processes: tcp,
	// fabric or auto (unchecked; OpenTransport refuses another).
	Transport fabric.Transport
	// SetupTimeout bounds each wait of a job's set-up: each step of a
	// rank session's (gpu.Config.SetupTimeout; 0: two minutes) and each
	// exchange of the transport's (fabric.Options.Timeout). SetupBound
	// names its setting in the transport's errors ("MSCCLGO_NCCL_TIMEOUT";
	// empty: none is named).
	SetupTimeout time.Duration
	SetupBound   string
	// HelloTimeout bounds, under Transport auto, the fabric's hello (every
	// peer answering), after which the job goes on over tcp; HelloBound
	// names its setting in that error ("--fabric-hello-timeout").
	HelloTimeout time.Duration
	HelloBound   string
	// ReplayTimeout bounds a communicator's launch replayed from a CUDA
	// graph with no progress (gpu.Config.ReplayTimeout; 0: ten minutes).
	ReplayTimeout time.Duration
	// Threads is the threads per block (gpu.Config.Threads); 0 (or less)
	// takes the default.
	Threads int
	// MaxSessions bounds the plan-instance sessions a communicator keeps
	// open (gpu.Config.MaxSessions; 0: gpu.DefaultMaxSessions).
	MaxSessions int
	// MeetEveryCall makes a communicator's every call meet its peers over
	// the bootstrap (gpu.Config.MeetEveryCall: make nccl-bench's
	// baseline).
	MeetEveryCall bool
	// Graph captures each session's launch into a graph and replays it
	// (gpu.Config.Graph).
	Graph bool
}

// Device is what a GPU backend's driver side gives a configuration: the
// backend's name ("gpu", "gpu-emu"), the driver each session opens, and
// optionally the machine's device count and a driver per device number
// (both nil: every session runs on Open's device).
type Device struct {
	Name       string
	Open       func() (gpu.Driver, error)
	Devices    func() (int, error)
	OpenDevice func(device int) (gpu.Driver, error)
}

// GPUConfig is the complete configuration of a GPU backend on device d
// under s: every field of gpu.Config is set here, and nowhere else.
func (s Settings) GPUConfig(d Device) gpu.Config {
	return gpu.Config{
		Name:          d.Name,
		Open:          d.Open,
		Threads:       max(s.Threads, 0),
		Devices:       d.Devices,
		OpenDevice:    d.OpenDevice,
		SetupTimeout:  s.SetupTimeout,
		Graph:         s.Graph,
		ReplayTimeout: s.ReplayTimeout,
		MeetEveryCall: s.MeetEveryCall,
		MaxSessions:   s.MaxSessions,
	}
}
