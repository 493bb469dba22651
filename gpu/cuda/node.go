//go:build cuda

package cuda

// node.go holds Node, the devices of this process as sessions share
// them: each device's launch admission (gpu.Admission), its identity (the
// UUID every process of the host sees) and peer access between the
// devices, which a driver enables for the devices of its peers.

import (
	"errors"
	"fmt"
	"sync"

	"github.com/mscclgo/mscclgo/gpu"
	"gorgonia.org/cu"
)

// attrMulticast is CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED (CUDA 12.1),
// which CUDA 11.8's cuda.h lacks.
const attrMulticast = cu.DeviceAttribute(132)

// Node is this process's view of its CUDA devices. Drivers opened from
// one Node share each device's launch admission, so that any number of
// sessions may launch on a device from any goroutines without one
// launch's blocks waiting for room that spinning blocks of another hold.
// Open every session of a process from one Node (Open makes a Node per
// call, for a driver used alone).
type Node struct {
	mu  sync.Mutex
	adm map[int]*gpu.Admission
}

// NewNode returns a Node with no device opened yet.
func NewNode() *Node { return &Node{adm: map[int]*gpu.Admission{}} }

// admission returns device's admission, made on first use for sms
// multiprocessors.
func (n *Node) admission(device int, name string, sms int) *gpu.Admission {
	n.mu.Lock()
	defer n.mu.Unlock()
	a, ok := n.adm[device]
	if !ok {
		a = gpu.NewAdmission(fmt.Sprintf("CUDA device %d (%s)", device, name), sms)
		n.adm[device] = a
	}
	return a
}

// Open returns the driver of CUDA device number device (an ordinal of
// the devices CUDA_VISIBLE_DEVICES leaves visible), sharing the device's
// admission with the Node's other drivers.
func (n *Node) Open(device int) (gpu.Driver, error) {
	d, err := open(device)
	if err != nil {
		return nil, err
	}
	d.ordinal = device
	d.adm = n.admission(device, d.info.Name, d.info.SMs)
	return d, nil
}

// Devices returns the number of CUDA devices visible.
func Devices() (int, error) {
	n, err := cu.NumDevices()
	if err != nil {
		return 0, fmt.Errorf("cuda: counting devices: %w", err)
	}
	return n, nil
}

// DeviceID returns the device's UUID, as nvidia-smi writes it.
func (d *driver) DeviceID() string { return d.uuid }

// Admission is the device's launch admission.
func (d *driver) Admission() *gpu.Admission { return d.adm }

// EnablePeer lets the kernels of this driver's context access the memory
// of the device whose UUID is id (cuCtxEnablePeerAccess with that
// device's primary context), where cuDeviceCanAccessPeer allows it.
func (d *driver) EnablePeer(id string) error {
	if err := d.open(); err != nil {
		return err
	}
	if id == d.uuid {
		return nil
	}
	n, err := cu.NumDevices()
	if err != nil {
		return fmt.Errorf("cuda: counting devices: %w", err)
	}
	for o := range n {
		peer, err := cu.GetDevice(o)
		if err != nil {
			return fmt.Errorf("cuda: device %d: %w", o, err)
		}
		u, err := peer.UUID()
		if err != nil {
			return fmt.Errorf("cuda: device %d: reading its UUID: %w", o, err)
		}
		if "GPU-"+u.String() != id {
			continue
		}
		can, err := d.dev.CanAccessPeer(peer)
		if err != nil {
			return fmt.Errorf("cuda: cuDeviceCanAccessPeer(%d, %d): %w", d.ordinal, o, err)
		}
		if can == 0 {
			return fmt.Errorf("cuda: device %d cannot access the memory of device %d (cuDeviceCanAccessPeer says no: "+
				"no NVLink or PCIe peer path between them); place ranks that share memory on devices with peer access", d.ordinal, o)
		}
		pctx, err := peer.RetainPrimaryCtx()
		if err != nil {
			return fmt.Errorf("cuda: device %d: retaining the primary context: %w", o, err)
		}
		err = d.do(fmt.Sprintf("enabling access to device %d's memory", o), func() error {
			if err := pctx.EnablePeerAccess(0); err != nil && !errors.Is(err, cu.PeerAccessAlreadyEnabled) {
				return err
			}
			return nil
		})
		// Peer access lasts as long as the peer's context: the Node's
		// drivers keep it retained while they run.
		_ = peer.ReleasePrimaryCtx()
		return err
	}
	return fmt.Errorf("cuda: no device of this process has UUID %s", id)
}
