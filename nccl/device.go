package main

// device.go runs a call's plan on the library's GPU backend (devcomm.Comm):
// on the caller's device buffers and stream, asynchronously, the ranks
// meeting per call over the communicator's bootstrap. Which backend a
// build has is chosen at build time (device_emu.go, device_none.go).

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/executor/fabric"
	"github.com/mscclgo/mscclgo/executor/rankwire"
	"github.com/mscclgo/mscclgo/gpu"
	"github.com/mscclgo/mscclgo/gpu/devcomm"
	"github.com/mscclgo/mscclgo/runconfig"
)

// deviceTag is the first bootstrap message tag of a communicator's plan
// sessions (the bootstrap's other users take none).
const deviceTag = 1 << 20

// openDevice opens c's rank of a devcomm.Comm when the build has a device
// backend; every rank of c calls it at once.
func (c *comm) openDevice() error {
	dev, ok := theLibrary.device(c.dev)
	if !ok {
		return nil
	}
	s, err := c.settings()
	if err != nil {
		return err
	}
	if dev.threads > 0 {
		s.Threads = dev.threads
	}
	hosts := make([]int, c.size)
	for i, h := range c.boot.Hosts() {
		for _, r := range h.Ranks {
			hosts[r] = i
		}
	}
	port, err := portNet(c, s)
	if err != nil {
		return err
	}
	gc, err := devcomm.Open(context.Background(), s.GPUConfig(dev.Device), rankwire.World{Net: port, Host: hosts, Tag: deviceTag})
	if err != nil {
		if c.wire != nil {
			_ = c.wire.Close() // (its own error is beside the point)
		}
		return errorf(resultSystem, "rank %d of %d: %v", c.rank, c.size, err)
	}
	if err := gc.NoMailbox(); err != nil {
		logInfo("rank %d of %d: no mailbox, every call meets its peers over the bootstrap: %v", c.rank, c.size, err)
	}
	c.gpu = gc
	return nil
}

// settings are the run-time settings of c's device communicator, from
// the environment (runconfig.FromEnv), with c's set-up timeout.
func (c *comm) settings() (runconfig.Settings, error) {
	s, err := runconfig.FromEnv(os.Getenv)
	if err != nil {
		return s, errorf(resultInvalidArgument, "rank %d of %d: %v", c.rank, c.size, err)
	}
	s.SetupTimeout = c.timeout
	return s, nil
}

// portNet returns what carries c's port channels between processes, as
// MSCCLGO_TRANSPORT says (s.Transport): the bootstrap's connections
// (tcp), a libfabric wire (fabric; FI_PROVIDER picks the provider), or
// auto, the default (fabric where it opens on every rank and every peer
// answers its hello within MSCCLGO_FABRIC_HELLO_TIMEOUT, else tcp, every
// rank alike). A wire closes with the communicator (endNow), before its
// bootstrap.
func portNet(c *comm, s runconfig.Settings) (rankwire.Net, error) {
	if _, err := s.CheckTransport(); err != nil {
		var se *runconfig.SettingError
		if errors.As(err, &se) && se.Setting == runconfig.SettingTransport {
			err = se.Err
		}
		return nil, errorf(resultInvalidArgument, "rank %d of %d: %s=%v", c.rank, c.size, fabric.TransportVar, err)
	}
	if err := c.sameTransport(string(s.Transport)); err != nil {
		return nil, err
	}
	carrier, err := s.OpenTransport(context.Background(), c.boot)
	switch {
	case err != nil:
		return nil, errorf(resultSystem, "rank %d of %d: %s=fabric: %v", c.rank, c.size, fabric.TransportVar, err)
	case carrier.Refused != nil:
		logInfo("rank %d of %d: port channels between processes over tcp (fabric refused: %v)", c.rank, c.size, carrier.Refused)
		return c.boot, nil
	case carrier.Wire == nil:
		logInfo("rank %d of %d: port channels between processes over tcp (the bootstrap's connections)", c.rank, c.size)
		return c.boot, nil
	}
	logInfo("rank %d of %d: port channels between processes over fabric, libfabric provider %s", c.rank, c.size, carrier.Wire.Provider())
	c.wire = carrier.Wire
	return carrier.Wire, nil
}

// sameTransport checks, on every rank of c at once, that every rank was
// given the same MSCCLGO_TRANSPORT (name): a rank on tcp and a peer on
// fabric would each wait for the other's set-up on a wire the other
// never opens. The exchange waits at most MSCCLGO_NCCL_TIMEOUT.
func (c *comm) sameTransport(name string) error {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	all, err := c.boot.AllGather(ctx, []byte(name))
	if err != nil {
		return errorf(resultSystem, "rank %d of %d: comparing MSCCLGO_TRANSPORT with the other ranks (within MSCCLGO_NCCL_TIMEOUT, %v): %v", c.rank, c.size, c.timeout, err)
	}
	for r, theirs := range all {
		if string(theirs) != name {
			return errorf(resultInvalidUsage, "rank %d of %d: MSCCLGO_TRANSPORT differs between ranks: rank %d runs %q, rank %d %q (unset: auto): set it alike on every rank", c.rank, c.size, c.rank, name, r, theirs)
		}
	}
	return nil
}

// opener opens the plan instance of decision d for call k: made once
// per cached decision, it captures what it needs, not the whole decision.
func (c *comm) opener(k call, d decision) func() (*executor.Instance, *executor.BufferLayout, executor.Options, error) {
	path, planInPlace, size, dt, coll := d.path, d.planInPlace, c.planSize(k, d), planDType(k.dtype), k.coll
	return func() (*executor.Instance, *executor.BufferLayout, executor.Options, error) {
		inst, layout, err := c.plansRun.instantiate(path, coll, c.size, size, dt, planInPlace, false)
		return inst, layout, executor.Options{DType: dt}, err
	}
}

// runOnDevice enqueues the plan of d for call k on the caller's stream.
// ran is false, with the reason, when the build has no device backend
// or k cannot be taken. Where the plan's placement is not the call's
// (decide chooses the plan from what every rank shares, not from this
// rank's placement), the input is copied on the caller's stream first:
//   - an in-place plan for an out-of-place allreduce or allgather runs on
//     the receive buffer, the input copied to where the plan reads it;
//   - an in-place plan for an out-of-place reducescatter runs on the
//     communicator's staging buffer (devcomm.Comm.Staging), the whole input
//     copied there, and the rank's slice is copied to the output after
//     the launch;
//   - an out-of-place plan for an in-place call reads the input from the
//     staging buffer.
func (c *comm) runOnDevice(k call, d decision) (ran bool, err error, reason string) {
	switch {
	case c.gpu == nil:
		return false, nil, ""
	case k.groupDepth > 0 && !k.deferred:
		return false, nil, "a call inside a group runs at the group's end"
	}
	if k.send == 0 || k.recv == 0 {
		return true, errorf(resultInvalidArgument, "%s: a NULL buffer (send %#x, receive %#x)", k.fn, k.send, k.recv), ""
	}
	red, err := reductionOf(k, c.size)
	if err != nil {
		return true, err, ""
	}
	if red.scaled() {
		if hostMemEnabled() {
			return false, nil, "" // host-memory runs scale on the host
		}
		return false, nil, fmt.Sprintf("%s of %s scales %s, which the device path cannot do yet (it has no kernel to scale a buffer by; host-memory runs do)", k.opLabel(), dtypeName(k.dtype), scaleWhat(red))
	}
	if d.padded() {
		return c.runPaddedOnDevice(k, d, red)
	}
	size := k.size(c.size)
	st := gpu.Stream(k.stream)
	bytes := k.count * elemSize(k.dtype) // the rank's own part
	in, out := gpu.DevPtr(k.send), gpu.DevPtr(k.recv)
	var after func() error // a copy after the launch, on the stream
	var pre [3]uint64      // a copy before it: destination, source, bytes
	var how string
	switch {
	case d.viaCopy && k.coll == collReduceScatter:
		stage, err := c.gpu.Staging(size)
		if err != nil {
			return true, errorf(resultSystem, "%s: %v", c.describe(k), err), ""
		}
		in, out = stage, stage+gpu.DevPtr(uint64(c.rank)*bytes)
		pre = [3]uint64{uint64(stage), uint64(k.send), size}
		after = func() error { return c.gpu.CopyOnStream(st, gpu.DevPtr(k.recv), out, bytes) }
		how = "the input is copied to the staging buffer, the plan runs there in place, and the rank's slice is copied to the output after it (device copies on the caller's stream)"
	case d.viaCopy:
		// allreduce: the whole receive buffer; allgather: the rank's slice.
		in = gpu.DevPtr(k.recv)
		if k.coll == collAllGather {
			in += gpu.DevPtr(uint64(c.rank) * bytes)
		}
		pre = [3]uint64{uint64(in), uint64(k.send), bytes}
		how = "the input is copied first (a device copy on the caller's stream)"
	case d.viaStage:
		n := bytes
		if k.coll == collReduceScatter {
			n = size // the whole input, which holds the output
		}
		stage, err := c.gpu.Staging(n)
		if err != nil {
			return true, errorf(resultSystem, "%s: %v", c.describe(k), err), ""
		}
		in = stage
		pre = [3]uint64{uint64(stage), uint64(k.send), n}
		how = "the input is copied to the staging buffer first (a device copy on the caller's stream)"
	}
	if pre[2] > 0 {
		if err := c.gpu.CopyOnStream(st, gpu.DevPtr(pre[0]), gpu.DevPtr(pre[1]), pre[2]); err != nil {
			return true, errorf(resultSystem, "%s: %v", c.describe(k), err), ""
		}
		if logging() {
			logInfo("%s: plan %s is %s and the call is not: %s", c.describe(k), d.plan, placeName(d.planInPlace), how)
		}
	}
	key, desc, open := d.devKey, d.devDesc, d.open
	if key == "" {
		key, desc = c.deviceStrings(k, d)
	}
	if open == nil {
		open = c.opener(k, d)
	}
	err = c.gpu.Enqueue(context.Background(), devcomm.Call{
		Key: key, Desc: desc, Open: open,
		In: in, Out: out, Stream: st, Reduce: red.op,
	})
	if errors.Is(err, devcomm.ErrNotCapturable) {
		// Refused on every rank before they met: the call goes on as if
		// no plan fitted.
		return false, nil, fmt.Sprintf("the stream is being captured into a CUDA graph and %v", err)
	}
	if err != nil {
		return true, errorf(resultInvalidUsage, "%v", err), ""
	}
	if after != nil {
		if err := after(); err != nil {
			return true, errorf(resultSystem, "%s: copying the rank's slice from the staging buffer: %v", c.describe(k), err), ""
		}
	}
	if logging() {
		if open, evicted := c.gpu.Sessions(); int64(evicted) != c.evictLogged.Load() {
			c.evictLogged.Store(int64(evicted))
			logInfo("%s: %d plan instances open, %d closed so far to make room (%s bounds them)", c.describe(k), open, evicted, maxSessionsEnv)
		}
	}
	return true, nil, ""
}

// scaleWhat names what reduction r scales.
func scaleWhat(r reduction) string {
	if r.preMul != nil {
		return "each input element by a scalar before the sum"
	}
	return "the sum by the rank count after it"
}

// runPaddedOnDevice runs call k, whose count no plan takes whole, on the
// communicator's staging buffer laid out for the plan's padded count
// (pad.go): the input copied in block by block on the caller's stream,
// the plan run there, the first count elements of each output block
// copied to the caller's output after it. The pad is never read back.
func (c *comm) runPaddedOnDevice(k call, d decision, red reduction) (ran bool, err error, reason string) {
	l := c.layoutOf(k, d)
	st := gpu.Stream(k.stream)
	stage, err := c.gpu.Staging(l.stageBytes(d.planInPlace))
	if err != nil {
		return true, errorf(resultSystem, "%s: %v", c.describe(k), err), ""
	}
	inAt, outAt := l.stageOffsets(d.planInPlace)
	in, out := stage+gpu.DevPtr(inAt), stage+gpu.DevPtr(outAt)
	var copyErr error
	l.copies(true, func(callAt, planAt, n uint64) {
		if copyErr == nil {
			copyErr = c.gpu.CopyOnStream(st, in+gpu.DevPtr(planAt), gpu.DevPtr(k.send)+gpu.DevPtr(callAt), n)
		}
	})
	if copyErr != nil {
		return true, errorf(resultSystem, "%s: staging the input: %v", c.describe(k), copyErr), ""
	}
	key, desc, open := d.devKey, d.devDesc, d.open
	if key == "" {
		key, desc = c.deviceStrings(k, d)
	}
	if open == nil {
		open = c.opener(k, d)
	}
	err = c.gpu.Enqueue(context.Background(), devcomm.Call{Key: key, Desc: desc, Open: open, In: in, Out: out, Stream: st, Reduce: red.op})
	if errors.Is(err, devcomm.ErrNotCapturable) {
		return false, nil, fmt.Sprintf("the stream is being captured into a CUDA graph and %v", err)
	}
	if err != nil {
		return true, errorf(resultInvalidUsage, "%v", err), ""
	}
	l.copies(false, func(callAt, planAt, n uint64) {
		if copyErr == nil {
			copyErr = c.gpu.CopyOnStream(st, gpu.DevPtr(k.recv)+gpu.DevPtr(callAt), out+gpu.DevPtr(planAt), n)
		}
	})
	if copyErr != nil {
		return true, errorf(resultSystem, "%s: copying the output from the staging buffer: %v", c.describe(k), copyErr), ""
	}
	if logging() {
		logInfo("%s: plan %s runs %d elements per rank block on the staging buffer, padded from %d (device copies on the caller's stream)", c.describe(k), d.plan, d.padCount, k.count)
	}
	return true, nil, ""
}

// deviceStrings are the plan-instance key and the description of call k
// with the plan of d, as devcomm.Comm compares them across ranks: neither
// holds the call's placement, which is each rank's own (NCCL's rule;
// decide chooses the plan without it).
func (c *comm) deviceStrings(k call, d decision) (key, desc string) {
	op := ""
	if k.op >= 0 {
		op = " " + k.opLabel()
	}
	key = fmt.Sprintf("%s|%d|%s|%v", d.path, c.planSize(k, d), planDType(k.dtype).Name(), d.planInPlace)
	desc = fmt.Sprintf("%s count %d %s%s with %s plan %s", k.fn, k.count, dtypeName(k.dtype), op, placeName(d.planInPlace), d.plan)
	return key, desc
}

// devices is the library's device backend: the driver side of a device
// number's configuration (runconfig.Device), made on first use; threads,
// when set, is the build's threads per block in place of
// MSCCLGO_NCCL_THREADS.
type devices struct {
	mu      sync.Mutex
	open    func(dev int) runconfig.Device
	threads int
	devs    map[int]runconfig.Device
	streams map[int]streamSyncer // the emulated device's streams, per device
}

// streamSyncer waits for a stream's work (emu.Streams).
type streamSyncer interface {
	Synchronize(st gpu.Stream, timeout time.Duration) error
}

// libraryDevice is device dev of the build's device backend, with the
// build's threads per block (0: the settings').
type libraryDevice struct {
	runconfig.Device
	threads int
}

// device returns device dev of the build's device backend, false when
// the build has none.
func (l *library) device(dev int) (libraryDevice, bool) {
	d := l.devices
	if d == nil || d.open == nil {
		return libraryDevice{}, false
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	rd, ok := d.devs[dev]
	if !ok {
		rd = d.open(dev)
		d.devs[dev] = rd
	}
	return libraryDevice{Device: rd, threads: d.threads}, true
}
