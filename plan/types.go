package plan

import "fmt"

// BufferType names one of a rank's three buffers.
type BufferType uint8

// The buffer types, in the order MSCCL++ declares them (the GPU kernel's
// layout numbers them the same way).
const (
	Input BufferType = iota
	Output
	Scratch

	// NumBufferTypes is the number of buffer types.
	NumBufferTypes = 3
)

// String returns the plan spelling: "i", "o" or "s".
func (b BufferType) String() string {
	switch b {
	case Input:
		return "i"
	case Output:
		return "o"
	case Scratch:
		return "s"
	}
	return fmt.Sprintf("BufferType(%d)", uint8(b))
}

// Name returns the word for b that the DSL's attributes and every
// message use: "input", "output" or "scratch".
func (b BufferType) Name() string {
	switch b {
	case Input:
		return "input"
	case Output:
		return "output"
	case Scratch:
		return "scratch"
	}
	return b.String()
}

// ParseBufferType returns the buffer type of a plan spelling.
func ParseBufferType(s string) (BufferType, bool) {
	switch s {
	case "i":
		return Input, true
	case "o":
		return Output, true
	case "s":
		return Scratch, true
	}
	return 0, false
}

// ChannelType is the kind of a channel: memory (NVLink load/store), port
// (proxy-driven), switch (NVLS multicast), or none for purely local ops.
type ChannelType uint8

// The channel kinds; NoChannel is an op without a channel.
const (
	NoChannel ChannelType = iota
	Memory
	Port
	Switch

	// NumChannelTypes is the number of channel kinds, NoChannel included.
	NumChannelTypes = 4
)

// String returns the plan spelling: "none", "memory", "port" or "switch".
func (c ChannelType) String() string {
	switch c {
	case NoChannel:
		return "none"
	case Memory:
		return "memory"
	case Port:
		return "port"
	case Switch:
		return "switch"
	}
	return fmt.Sprintf("ChannelType(%d)", uint8(c))
}

// ParseChannelType returns the channel type of a plan spelling.
func ParseChannelType(s string) (ChannelType, bool) {
	switch s {
	case "none":
		return NoChannel, true
	case "memory":
		return Memory, true
	case "port":
		return Port, true
	case "switch":
		return Switch, true
	}
	return 0, false
}
