package planset

import "math"

// hostcost.go: what a plan costs on host memory. A call whose buffers are
// host memory runs on the CPU backend (executor/cpu), where the plans'
// size ranges, set for a GPU's memory system (MSCCL++'s defaults, or
// install --hw's predictions), say nothing: there an LL packet costs a
// flag written and polled per 8 bytes, and the packet plans that a GPU
// runs up to 1 MiB are 5 to 30 times slower than the Simple plans from
// 32 KiB up (docs/integration.md, "Plan choice on host memory").
// Request.Host selects by this model instead of the ranges.

// Host cost model constants: the fixed part per launch is per rank pair
// (n² thread blocks' meetings on the CPU backend), the variable part per
// byte and peer. Fitted to `mscclgo run --backend cpu` of allreduce_packet
// (LL) and allreduce_rsag (Simple) at 2, 4 and 8 ranks, 4 KiB to 1 MiB
// (2026-12-02, the 2-core development machine): LL about 7 µs·n² +
// 4 ns/B·(n−1), Simple about 14 µs·n² + 0.1 ns/B·(n−1); the crossover
// (8 KiB at 2 ranks, 16 KiB at 8) is where the model puts it.
const (
	hostFixedLLUS     = 7.0
	hostFixedSimpleUS = 14.0
	hostByteLLNS      = 4.0
	hostByteSimpleNS  = 0.1
)

// HostCostUS is the modelled time in µs of plan e for a call of size
// bytes on host memory (the CPU backend): n²·fixed + size·(n−1)·per byte,
// with the fixed and per-byte costs of e's protocol.
func HostCostUS(e Entry, size uint64) float64 {
	n := float64(max(e.WorldSize, 1))
	fixed, perByte := hostFixedSimpleUS, hostByteSimpleNS
	if e.Protocol == "LL" {
		fixed, perByte = hostFixedLLUS, hostByteLLNS
	}
	return n*n*fixed + float64(size)*(n-1)*perByte/1e3
}

// SizeRange is the range of message sizes plan e takes for req: its own,
// or every size for a call on host memory (Request.Host), where plans
// are chosen by HostCostUS and instantiated whatever their range (a
// plan's chunking, not its range, is what makes it correct at a size).
func (req Request) SizeRange(e Entry) (lo, hi uint64) {
	if req.Host {
		return 0, math.MaxUint64
	}
	return e.MinMessageSize, e.MaxMessageSize
}
