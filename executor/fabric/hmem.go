package fabric

// How a buffer that port channels reach is registered with the provider.
// Device memory is registered as itself (fi_mr_regattr with
// FI_HMEM_CUDA and the device's ordinal: GPUDirect RDMA) only where the
// provider offers FI_HMEM; otherwise, and for host memory, the bytes go
// through the wire's registered host staging rings, as the backends'
// transfers do today. No provider here offers FI_HMEM with CUDA, so the
// device path is unverified (docs/fabric.md).

const (
	capHMEM    = 1 << 47 // FI_HMEM
	ifaceHost  = 0       // FI_HMEM_SYSTEM
	ifaceCUDA  = 1       // FI_HMEM_CUDA
	noDevice   = -1
	regStaging = "host staging ring"
)

// Registration says how a buffer is registered: Staging (copied through
// the wire's host staging rings), or as memory of interface Iface
// (FI_HMEM_SYSTEM, FI_HMEM_CUDA) on Device.
type Registration struct {
	Staging bool
	Iface   int
	Device  int
	// Why names the reason for the choice, for logs and errors.
	Why string
}

// chooseRegistration decides how a buffer is registered, given the
// provider's capabilities (fi_info caps) and the buffer's device: its
// CUDA ordinal, or noDevice for host memory.
func chooseRegistration(caps uint64, device int) Registration {
	switch {
	case device == noDevice:
		return Registration{Staging: true, Device: noDevice, Why: "host memory: through the " + regStaging}
	case caps&capHMEM == 0:
		return Registration{Staging: true, Device: noDevice, Why: "the provider offers no FI_HMEM: device memory goes through the " + regStaging}
	}
	return Registration{Iface: ifaceCUDA, Device: device, Why: "FI_HMEM_CUDA on the device (GPUDirect RDMA)"}
}
