package gpu

// config.go builds a backend's Config: the one constructor the command
// line (from its flags) and the NCCL library (from the environment) use.

import "strconv"

// Settings are what a program chooses of a GPU backend, from its flags
// (mscclgo run --threads) or from the environment (SettingsFromEnv).
type Settings struct {
	// Threads is the number of threads per block; 0 (or less) takes the
	// default (Config.Threads).
	Threads int
}

// ThreadsEnv is the environment variable of Settings.Threads for the
// NCCL library.
const ThreadsEnv = "MSCCLGO_NCCL_THREADS"

// SettingsFromEnv reads the settings from the environment that getenv
// (os.Getenv) gives: ThreadsEnv. A value that is not an integer is 0, the
// default.
func SettingsFromEnv(getenv func(string) string) Settings {
	threads, _ := strconv.Atoi(getenv(ThreadsEnv))
	return Settings{Threads: threads}
}

// NewConfig returns the Config of the backend name ("gpu", "gpu-emu")
// whose sessions open their driver with open, under settings s.
func NewConfig(name string, open func() (Driver, error), s Settings) Config {
	return Config{Name: name, Open: open, Threads: max(s.Threads, 0)}
}
