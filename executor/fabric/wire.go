//go:build cgo

package fabric

/*
#cgo LDFLAGS: -ldl
#include <stdlib.h>
#include "shim.h"
*/
import "C"

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"
)

// Access flags of fi_mr_reg.
const (
	accWrite       = 1 << 9
	accRemoteWrite = 1 << 13
	flagRemoteData = 1 << 17 // FI_REMOTE_CQ_DATA in a completion's flags
	mrLocal        = 1 << 2
	mrVirtAddr     = 1 << 4
	errAgain       = -11  // -FI_EAGAIN
	errAvail       = -259 // -FI_EAVAIL
)

// The remote CQ data of a write: bit 31 says credit (else record), bit
// 30 says farewell (ctlBye or ctlAck in the low bits), bits 29-20 the
// sender's rank, bits 19-0 the record's offset in the ring in 64-byte
// units (or the low bits of the credited sequence number).
const (
	cqCredit  = 1 << 31
	cqCtl     = 1 << 30
	ctlBye    = 1 // the sender closes: nothing more of it follows
	ctlAck    = 2 // the answer to a bye: nothing more of the sender follows
	rankShift = 20
	lowMask   = 1<<rankShift - 1
	maxRanks  = 1 << 10
	recAlign  = 64
	recHead   = 24
	nContexts = 1024
)

// The progress loop's pace. After any activity it polls without
// sleeping for spinFor; then every pollEvery until pollFor after the last
// activity; then it sleeps on the completion queue's wait object
// (fi_trywait, then poll on its file descriptor), which wakes when a
// peer's bytes arrive or, with writes of its own on their way, when the
// provider can move more of them (its sockets drain), and which the
// wire's own senders end (wake) when they post; blockFor bounds each
// sleep, writeBlock while writes are on their way. A provider without a
// wait object is polled every pollEvery, and after restAfter of quiet
// every restEvery.
const (
	spinFor    = 100 * time.Microsecond
	pollEvery  = 20 * time.Microsecond
	pollFor    = 2 * time.Millisecond
	blockFor   = 10 * time.Millisecond
	writeBlock = time.Millisecond
	restAfter  = 50 * time.Millisecond
	restEvery  = 500 * time.Microsecond
)

// A credit goes once the records taken since the last reach a
// creditEvery-th of the ring, or creditDelay after it became due.
const (
	creditEvery = 8
	creditDelay = 500 * time.Microsecond
)

// byeWait bounds a closing wire's wait for its peers' answers to its
// farewell.
const byeWait = 2 * time.Second

// cqeCount is how many completions one read takes at most; assistFor
// bounds a sender's own look for its write's completion (assist).
const (
	cqeCount  = 64
	assistFor = 50 * time.Microsecond
)

// directBytes is the smallest payload written from the caller's memory
// instead of a copy in the send ring.
const directBytes = 64 << 10

// Record flags.
const (
	recFirst = 1
	recLast  = 2
	recPair  = 4 // a second message, header only, follows (SendPort2)
)

// The tag of the set-up's hello messages; sessions' tags are above it.
const helloTag = 0

// Wire is a process's libfabric endpoint for the port traffic of every
// session of its job.
type Wire struct {
	net  Net
	rank int
	size int
	f    *C.mgf
	prov string
	ring uint64 // bytes of each per-peer ring

	recvMem, sendMem unsafe.Pointer
	recvMR, sendMR   unsafe.Pointer
	sendDesc         unsafe.Pointer
	recvLen, sendLen uint64

	peers []peerOut // by rank: the send side
	ins   []peerIn  // by rank: the receive side (cqMu)

	mu      sync.Mutex
	changed chan struct{} // closed and replaced at every change (mu)
	queues  map[qkey]*queue
	// holds[r] are the sequence numbers of rank r's records whose
	// payload a receiver holds (RecvPort): not credited yet.
	holds     []map[uint32]bool
	slots     []slot
	free      []int
	closed    bool
	inflight  int    // writes posted and not completed (mu)
	mrLocal   bool   // the provider reads only registered local memory (FI_MR_LOCAL)
	injectMax int    // the largest write the provider injects (fi_inject_writedata)
	placeOK   bool   // payloads may go straight into peers' registered memory (CanPlace)
	virtAddr  bool   // remote addresses are virtual addresses (FI_MR_VIRT_ADDR)
	nextKey   uint64 // the next key requested for a registration (mu)
	caps      uint64 // the provider's capabilities (fi_info caps)
	fatal     error  // the progress loop's own failure
	// unclean says the farewell did not end with every peer (a lost
	// rank, a failed peer, writes still on their way, no answer in
	// time): Close then leaves the endpoint and its memory to the
	// process's end (mu).
	unclean    bool
	recvKeyVal uint64

	// users is held (read) by every post while it touches the send
	// ring and the endpoint, and (write) by Close to release them.
	users sync.RWMutex

	// sleeping says the progress loop sleeps, or is about to, in
	// mgf_block: whoever gives it work then wakes it (kick).
	sleeping atomic.Bool
	// woken says a kick came: the sleep ends.
	woken atomic.Bool
	// cqFile is (a duplicate of) the completion queue's wait object
	// registered with Go's network poller, and cqConn its raw access:
	// the progress loop sleeps as a goroutine, not a blocked thread, and
	// wakes the way the TCP wire's readers do. nil: it sleeps in
	// mgf_block, or polls.
	cqFile *os.File
	cqConn syscall.RawConn

	// cqMu is held by whoever reads the completion queue and handles
	// what it read (the progress loop, or a sender looking for its own
	// write's completion: assist), so that completions are handled in
	// the order they were read; cqe is its buffer (C memory).
	cqMu sync.Mutex
	cqe  []C.mgf_cqe
	// assisted counts the sends whose direct writes' completion their
	// sender read itself, and completions the completions of this
	// wire's own writes read from the queue (for tests).
	assisted, completions atomic.Uint64

	// places are the registrations of RegisterPlace not released yet
	// (mu): the wire closes them before its domain.
	places map[*placeReg]bool

	// loopCopied counts the payload bytes the progress loop copied out
	// of the rings (small messages only; for tests).
	loopCopied atomic.Uint64
	// spins counts the progress loop's turns without sleeping
	// (runtime.Gosched) on an empty completion queue (for tests).
	spins atomic.Uint64

	stop chan struct{}
	done chan struct{}
}

// peerOut is the send side towards one peer.
type peerOut struct {
	send               sync.Mutex // one message at a time
	addr               uint64     // fi_addr_t
	key                uint64
	base               uint64 // remote address of the receive region (0 without FI_MR_VIRT_ADDR)
	name               string // its endpoint's address, for messages
	head, tail         uint64 // ring bytes written, freed (mu)
	seq                uint32 // last sequence number sent (mu)
	credit             uint32 // last sequence number the peer consumed (mu)
	out                []outRec
	err                error
	creditDue, credSeq uint32 // receive side's credit to send (cqMu)
	// The receive side's credit is sent once creditBytes (the records
	// taken since the last one, cqMu) reach creditEvery of the
	// ring, once a receiver released records it held (released, mu), or
	// creditDelay after it first became due (owedSince): not after
	// every record, which cost a write each way per message.
	creditBytes uint64
	released    bool
	owedSince   time.Time
	// The farewell (mu). A wire frees its endpoint only once no peer
	// of this process can touch it: libfabric's shm provider shares
	// the memory of an endpoint with the endpoints of the same process
	// that write to it, so one freed under a peer's progress or write
	// crashes that peer. posting counts the writes to the peer being
	// posted; gone says the peer said bye (nothing goes to it then);
	// ackOwed that its bye awaits our answer; bye our own farewell to
	// it: byeNone, byeSent, byeDone (answered, or it cannot be sent).
	posting int
	// inflight counts the writes to the peer posted and not completed
	// (mu): with shm their completion touches the peer's endpoint, so
	// neither the farewell nor its answer goes before they complete.
	inflight int
	gone     bool
	ackOwed  bool
	bye      int
}

const (
	byeNone = iota
	byeSent
	byeDone
)

type outRec struct {
	seq  uint32
	end  uint64
	done bool
}

// peerIn is the receive side from one peer (cqMu: the progress loop, or
// a sender's assist).
type peerIn struct {
	expect  uint32
	pending map[uint32]uint32 // seq -> ring offset, arrived early
	// st is the message of several records being received: its first
	// record queued it, the later ones add their parts to it.
	st *stream
}

// stream is a message of several records. The receiver (RecvPort) copies
// its parts out of the ring as they arrive, off the progress loop, and
// releases each to the sender once copied.
type stream struct {
	key   qkey // the queue of its receiver
	total int
	parts [][]byte // (mu) the records' payloads in the ring, in order
	seqs  []uint32 // (mu) their sequence numbers, held until copied
}

// streamPart is a record of a stream that the progress loop took.
type streamPart struct {
	st   *stream
	from int
	seq  uint32
	body []byte
}

// placeReg is a registration of RegisterPlace.
type placeReg struct{ mr unsafe.Pointer }

type slot struct {
	peer int
	seq  uint32
	used bool
}

type qkey struct {
	tag  uint32
	peer int
}

// msg is a received message. hold, when not 0, is the sequence number
// of the record whose ring memory payload is (a large message of one
// record, not copied): the receiver holds it until its next RecvPort.
type msg struct {
	head, payload []byte
	hold          uint32
	// st, where not nil, is a message of several records: RecvPort
	// copies its parts as they arrive.
	st *stream
}

// queue is the received messages of one (tag, peer), the record the
// receiver holds, and the buffer the payloads of several records are
// copied into (reused: a payload is valid until the next RecvPort).
type queue struct {
	msgs []msg
	held uint32
	buf  []byte
	// changed is closed and replaced when a message or a part of one
	// arrives for this queue, or the wire's or a peer's state changes
	// (mu): its receiver wakes for its own traffic only.
	changed chan struct{}
	// wakes counts its receiver's wake-ups that found nothing for it
	// (for tests).
	wakes uint64
}

// record is what each rank contributes to the set-up's all-gather.
type record struct {
	Err  string `json:"err,omitempty"`
	Prov string `json:"prov,omitempty"`
	Addr []byte `json:"addr,omitempty"`
	Key  uint64 `json:"key,omitempty"`
	Base uint64 `json:"base,omitempty"`
}

// Open opens the job's wire on every rank at once. Any rank's failure
// (libfabric missing, no provider with RMA, a peer that cannot be
// reached) fails every rank with an error that lists the ranks and why.
func Open(ctx context.Context, net Net, o Options) (*Wire, error) {
	if o.Timeout <= 0 {
		o.Timeout = 30 * time.Second
	}
	if o.RingBytes == 0 {
		o.RingBytes = 8 << 20
	}
	if o.RingBytes%recAlign != 0 || o.RingBytes < 64<<10 || o.RingBytes > 32<<20 {
		return nil, fmt.Errorf("fabric: ring of %d bytes: want a multiple of 64 between 64 KiB and 32 MiB", o.RingBytes)
	}
	n, me := net.Size(), net.Rank()
	if n > maxRanks {
		return nil, fmt.Errorf("fabric: %d ranks: at most %d", n, maxRanks)
	}
	w := &Wire{net: net, rank: me, size: n, ring: o.RingBytes, changed: make(chan struct{}),
		queues: map[qkey]*queue{}, places: map[*placeReg]bool{}, peers: make([]peerOut, n), ins: make([]peerIn, n), holds: make([]map[uint32]bool, n),
		stop: make(chan struct{}), done: make(chan struct{})}
	for i := range w.ins {
		w.ins[i] = peerIn{expect: 1, pending: map[uint32]uint32{}}
		w.holds[i] = map[uint32]bool{}
	}
	mine := record{}
	if err := w.openLocal(o.Provider); err != nil {
		mine.Err = err.Error()
	} else {
		mine.Prov = w.prov
		mine.Addr, mine.Key = w.name(), w.recvKey()
		if w.virtAddr {
			mine.Base = uint64(uintptr(w.recvMem))
		}
	}
	all, err := gather(ctx, net, mine, "opening the endpoint", o)
	if err != nil {
		w.release()
		return nil, err
	}
	for r, rec := range all {
		if rec.Prov != all[0].Prov {
			w.release()
			return nil, fmt.Errorf("fabric: rank 0 runs provider %q, rank %d %q: set FI_PROVIDER alike on every host", all[0].Prov, r, rec.Prov)
		}
	}
	mine = record{}
	for r, rec := range all {
		if r == me {
			continue
		}
		p := &w.peers[r]
		var addr C.uint64_t
		buf := C.CBytes(rec.Addr)
		rc := C.mgf_av_insert(w.f, buf, &addr)
		C.free(buf)
		if rc != 0 {
			mine.Err = fmt.Sprintf("inserting rank %d's address: %s", r, w.strerror(int(rc)))
			break
		}
		p.addr, p.key, p.base = uint64(addr), rec.Key, rec.Base
		p.name = addrString(rec.Addr)
	}
	if _, err := gather(ctx, net, mine, "inserting the addresses", o); err != nil {
		w.release()
		return nil, err
	}
	// The completions are read into C memory: cgo's check of an
	// argument &cqe[0] of a Go array copied the whole array into an
	// interface (an allocation) at every read.
	cbuf := (*C.mgf_cqe)(C.calloc(cqeCount, C.size_t(unsafe.Sizeof(C.mgf_cqe{}))))
	if cbuf == nil {
		w.release()
		return nil, fmt.Errorf("fabric: rank %d: out of memory for the completion queue's entries", me)
	}
	w.cqe = unsafe.Slice(cbuf, cqeCount)
	go w.progress()
	// The wire closes with the job (its users may not close it).
	context.AfterFunc(net.Context(), func() { _ = w.Close() })
	// Hello: every rank writes to every peer and waits for every peer's
	// write, so that an unreachable address fails the set-up, named.
	mine = record{}
	hello, bound := o.Timeout, ""
	if o.HelloTimeout > 0 {
		hello, bound = o.HelloTimeout, o.HelloBound
	}
	if err := w.hello(ctx, hello, bound); err != nil {
		mine.Err = err.Error()
	}
	if _, err := gather(ctx, net, mine, stepHello, o); err != nil {
		_ = w.Close()
		return nil, err
	}
	return w, nil
}

// gather is one all-gather of the set-up's records, waiting for the
// peers at most o.Timeout.
func gather(ctx context.Context, net Net, mine record, step string, o Options) ([]record, error) {
	data, err := json.Marshal(mine)
	if err != nil {
		return nil, err
	}
	bound := ""
	if o.TimeoutBound != "" {
		bound = " (" + o.TimeoutBound + ")"
	}
	ctx, cancel := context.WithTimeoutCause(ctx, o.Timeout, fmt.Errorf("not every rank came within %v%s", o.Timeout, bound))
	defer cancel()
	parts, err := net.AllGather(ctx, data)
	if err != nil && ctx.Err() != nil && context.Cause(ctx) != ctx.Err() && !errors.Is(err, context.Cause(ctx)) {
		err = fmt.Errorf("%w: %w", context.Cause(ctx), err)
	}
	if err != nil {
		return nil, fmt.Errorf("fabric: rank %d: %s: %w", net.Rank(), step, err)
	}
	all := make([]record, len(parts))
	var errs []string
	for r, p := range parts {
		if err := json.Unmarshal(p, &all[r]); err != nil {
			return nil, fmt.Errorf("fabric: %s: rank %d sent %d bytes that are not a set-up record: %v", step, r, len(p), err)
		}
		if all[r].Err != "" {
			errs = append(errs, fmt.Sprintf("rank %d: %s", r, all[r].Err))
		}
	}
	if len(errs) > 0 {
		return nil, &setupError{step: step, msg: fmt.Sprintf("fabric: %s failed: %s", step, strings.Join(errs, "; "))}
	}
	return all, nil
}

// openLocal opens this rank's endpoint and registers its regions.
func (w *Wire) openLocal(prov string) error {
	f, err := openFabric(prov, nContexts)
	if err != nil {
		return err
	}
	w.f = f
	w.prov = C.GoString(C.mgf_provider(f))
	w.mrLocal = int(C.mgf_mr_mode(f))&mrLocal != 0
	w.caps = uint64(C.mgf_caps(f))
	w.injectMax = int(C.mgf_inject_size(f))
	w.virtAddr = int(C.mgf_mr_mode(f))&mrVirtAddr != 0
	w.placeOK = !w.mrLocal && C.mgf_iov_limit(f) >= 2
	w.nextKey = 1 << 20
	w.cqFile, w.cqConn = pollable(int(C.mgf_wait_fd(f)))
	w.slots = make([]slot, nContexts)
	for i := nContexts - 1; i >= 0; i-- {
		w.free = append(w.free, i)
	}
	n := uint64(w.size)
	w.recvLen = n*w.ring + recAlign
	w.sendLen = n*w.ring + recAlign
	if w.recvMem = C.mgf_alloc(C.size_t(w.recvLen)); w.recvMem == nil {
		return fmt.Errorf("allocating %d bytes of receive rings", w.recvLen)
	}
	if w.sendMem = C.mgf_alloc(C.size_t(w.sendLen)); w.sendMem == nil {
		return fmt.Errorf("allocating %d bytes of send rings", w.sendLen)
	}
	var key C.uint64_t
	var desc unsafe.Pointer
	if rc := C.mgf_mr_reg(f, w.recvMem, C.size_t(w.recvLen), accRemoteWrite, C.uint64_t(2*w.rank+1), &w.recvMR, &key, &desc); rc != 0 {
		return fmt.Errorf("registering %d bytes of receive rings (fi_mr_reg): %s", w.recvLen, w.strerror(int(rc)))
	}
	w.recvKeyVal = uint64(key)
	if rc := C.mgf_mr_reg(f, w.sendMem, C.size_t(w.sendLen), accWrite, C.uint64_t(2*w.rank+2), &w.sendMR, &key, &w.sendDesc); rc != 0 {
		return fmt.Errorf("registering %d bytes of send rings (fi_mr_reg): %s", w.sendLen, w.strerror(int(rc)))
	}
	return nil
}

func (w *Wire) name() []byte {
	var buf [256]byte
	n := C.size_t(len(buf))
	if rc := C.mgf_getname(w.f, unsafe.Pointer(&buf[0]), &n); rc != 0 {
		return nil
	}
	return append([]byte(nil), buf[:n]...)
}

func (w *Wire) recvKey() uint64 { return w.recvKeyVal }

func (w *Wire) strerror(rc int) string {
	return fmt.Sprintf("%s (%d)", C.GoString(C.mgf_strerror(w.f, C.int(rc))), rc)
}

// addrString spells an endpoint name: IPv4 and IPv6 socket addresses
// (tcp, verbs over IP) as host:port, others in hex.
func addrString(b []byte) string {
	switch {
	case len(b) >= 8 && binary.LittleEndian.Uint16(b) == 2: // AF_INET
		return fmt.Sprintf("%d.%d.%d.%d:%d", b[4], b[5], b[6], b[7], binary.BigEndian.Uint16(b[2:]))
	case len(b) >= 24 && binary.LittleEndian.Uint16(b) == 10: // AF_INET6
		return fmt.Sprintf("[%s]:%d", net.IP(b[8:24]), binary.BigEndian.Uint16(b[2:]))
	}
	return fmt.Sprintf("%x", b)
}

// RegistrationFor says how the wire registers a buffer on device (a
// CUDA ordinal; -1: host memory): FI_HMEM_CUDA where the provider offers
// FI_HMEM, else through the host staging rings.
func (w *Wire) RegistrationFor(device int) Registration { return chooseRegistration(w.caps, device) }

// RegisterDevice registers n bytes of device memory at ptr on device for
// remote writes (fi_mr_regattr, FI_HMEM_CUDA), where RegistrationFor
// says so, and returns its key and its release. Where it does not, it
// refuses, naming why: the bytes then go through the staging rings.
func (w *Wire) RegisterDevice(ptr unsafe.Pointer, n uint64, device int) (uint64, func() error, error) {
	reg := w.RegistrationFor(device)
	if reg.Staging {
		return 0, nil, fmt.Errorf("fabric: rank %d: device memory on device %d over %s: %s", w.rank, device, w.prov, reg.Why)
	}
	w.users.RLock()
	defer w.users.RUnlock()
	var mr, desc unsafe.Pointer
	var key C.uint64_t
	if rc := C.mgf_mr_regattr(w.f, ptr, C.size_t(n), accRemoteWrite, 0, C.int(reg.Iface), C.int(reg.Device), &mr, &key, &desc); rc != 0 {
		return 0, nil, fmt.Errorf("fabric: rank %d: registering %d bytes of device %d memory with FI_HMEM_CUDA over %s: %s", w.rank, n, device, w.prov, w.strerror(int(rc)))
	}
	return uint64(key), func() error {
		if rc := C.mgf_mr_close(mr); rc != 0 {
			return fmt.Errorf("fabric: rank %d: releasing a device memory registration: %s", w.rank, w.strerror(int(rc)))
		}
		return nil
	}, nil
}

// Provider names the libfabric provider the wire runs on.
func (w *Wire) Provider() string { return w.prov }

// TransportName says what carries the port traffic: "fabric (PROVIDER)".
func (w *Wire) TransportName() string { return "fabric (" + w.prov + ")" }

// The bootstrap's part of rankwire.Net.

func (w *Wire) Rank() int { return w.rank }
func (w *Wire) Size() int { return w.size }
func (w *Wire) Send(ctx context.Context, peer int, tag uint32, data []byte) error {
	return w.net.Send(ctx, peer, tag, data)
}
func (w *Wire) Recv(ctx context.Context, peer int, tag uint32) ([]byte, error) {
	return w.net.Recv(ctx, peer, tag)
}
func (w *Wire) AllGather(ctx context.Context, data []byte) ([][]byte, error) {
	return w.net.AllGather(ctx, data)
}
func (w *Wire) Context() context.Context { return w.net.Context() }

// hello writes to every peer and waits for every peer's hello and for
// its own to be consumed.
// A peer that does not answer within timeout is named with the bound
// (bound names its setting, if any).
func (w *Wire) hello(ctx context.Context, timeout time.Duration, bound string) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	named := func(err error, p int, what string) error {
		if ctx.Err() != context.DeadlineExceeded {
			return err
		}
		within := timeout.String()
		if bound != "" {
			within += " (" + bound + ")"
		}
		return fmt.Errorf("%s rank %d at %s over %s: no answer within %s (an unreachable address?)", what, p, w.peers[p].name, w.prov, within)
	}
	for p := range w.size {
		if p == w.rank {
			continue
		}
		if err := w.SendPort(ctx, p, helloTag, nil, nil); err != nil {
			return named(err, p, "saying hello to")
		}
	}
	for p := range w.size {
		if p == w.rank {
			continue
		}
		if _, _, err := w.RecvPort(ctx, p, helloTag); err != nil {
			return named(err, p, "waiting for the hello of")
		}
		if err := w.drained(ctx, p); err != nil {
			return named(err, p, "waiting for the hello to be taken by")
		}
	}
	return nil
}

// SendPort sends one port message (head and payload) to peer with tag:
// RMA writes with remote CQ data of one or more records into the peer's
// ring. Messages to one peer with one tag arrive in order.
func (w *Wire) SendPort(ctx context.Context, peer int, tag uint32, head, payload []byte) error {
	return w.send(ctx, peer, tag, head, payload, nil, false)
}

// SendPort2 sends two messages to peer with tag, the first with a
// payload, the second only a header, as one transfer (a put with its
// signal): they arrive as two, in order.
func (w *Wire) SendPort2(ctx context.Context, peer int, tag uint32, head, payload, head2 []byte) error {
	return w.send(ctx, peer, tag, head, payload, head2, true)
}

// checkSend checks a message's destination and headers.
func (w *Wire) checkSend(peer int, head, head2 []byte) error {
	if peer < 0 || peer >= w.size || peer == w.rank {
		return fmt.Errorf("fabric: rank %d: send to rank %d of %d", w.rank, peer, w.size)
	}
	if len(head) > 255 || len(head2) > 255 {
		return fmt.Errorf("fabric: a message header of %d bytes", max(len(head), len(head2)))
	}
	return nil
}

func (w *Wire) send(ctx context.Context, peer int, tag uint32, head, payload, head2 []byte, pair bool) error {
	if err := w.checkSend(peer, head, head2); err != nil {
		return err
	}
	p := &w.peers[peer]
	p.send.Lock()
	defer p.send.Unlock()
	// A payload of more than one record goes in records of about equal
	// size, each at most a quarter of the ring so that several are on
	// their way at once; those written from the caller's memory are
	// waited for together at the end (the caller may reuse it then).
	total := uint64(len(payload))
	maxFrag := int(w.ring/4) - recHead - len(head) - len(head2)
	if nrec := (len(payload) + maxFrag - 1) / maxFrag; nrec > 1 {
		maxFrag = ((len(payload)+nrec-1)/nrec + recAlign - 1) &^ (recAlign - 1)
	}
	var pin runtime.Pinner
	defer pin.Unpin()
	var direct []uint32 // the records written from payload
	first := true
	for {
		n := min(len(payload), maxFrag)
		flags := byte(0)
		h, h2 := head, head2
		if first {
			flags |= recFirst
			if pair {
				flags |= recPair
			}
		} else {
			h, h2 = nil, nil
		}
		if n == len(payload) {
			flags |= recLast
		}
		if n >= directBytes && !w.mrLocal && len(direct) == 0 {
			pin.Pin(&payload[0])
		}
		seq, d, err := w.post(ctx, peer, tag, flags, h, h2, payload[:n], total, nil)
		if err != nil {
			return err
		}
		if d {
			direct = append(direct, seq)
		}
		payload = payload[n:]
		first = false
		if flags&recLast != 0 {
			break
		}
	}
	if len(direct) > 0 {
		last := direct[len(direct)-1]
		w.assist(func() bool { return w.isDone(peer, last) })
	}
	for _, seq := range direct {
		if err := w.completed(ctx, peer, seq); err != nil {
			return err
		}
	}
	return nil
}

// post writes one record to peer's ring, waiting for room. It returns the
// record's sequence number, and whether its payload is written from the
// caller's memory (pinned by the caller) rather than copied: then the
// caller waits for its completion before it returns.
func (w *Wire) post(ctx context.Context, peer int, tag uint32, flags byte, head, head2, payload []byte, total uint64, at *placeAt) (uint32, bool, error) {
	p := &w.peers[peer]
	heads := recHead + len(head) + len(head2)
	inRing := len(payload) // the payload's bytes in the record
	if at != nil {
		inRing = 0 // written into the peer's memory, not its ring
	}
	size := (uint64(heads+inRing) + recAlign - 1) &^ (recAlign - 1)
	var start uint64
	var seq uint32
	var si int
	for {
		w.mu.Lock()
		if err := w.stateLocked(peer); err != nil {
			w.mu.Unlock()
			return 0, false, err
		}
		w.freeLocked(p)
		start = p.head
		if off := start % w.ring; off+size > w.ring {
			start += w.ring - off // wrap: the rest of the ring is padding
		}
		if start+size-p.tail <= w.ring && len(w.free) > 0 {
			si = w.free[len(w.free)-1]
			w.free = w.free[:len(w.free)-1]
			p.seq++
			seq = p.seq
			p.head = start + size
			p.out = append(p.out, outRec{seq: seq, end: p.head})
			w.slots[si] = slot{peer: peer, seq: seq, used: true}
			w.inflight++
			p.inflight++
			w.mu.Unlock()
			break
		}
		ch := w.changed
		w.mu.Unlock()
		w.kick()
		if err := w.waitChange(ctx, ch, peer, "room in the ring of"); err != nil {
			return 0, false, err
		}
	}
	// The memory and the endpoint stay until this write is posted, and
	// no farewell goes to peer meanwhile.
	w.users.RLock()
	defer w.users.RUnlock()
	w.mu.Lock()
	if err := w.stateLocked(peer); err != nil {
		w.freeSlotLocked(si)
		w.mu.Unlock()
		return 0, false, err
	}
	p.posting++
	w.mu.Unlock()
	defer func() {
		w.mu.Lock()
		p.posting--
		w.mu.Unlock()
		w.kick() // an answer to a bye may wait for this
	}()
	off := start % w.ring
	local := unsafe.Add(w.sendMem, uint64(peer)*w.ring+off)
	rec := unsafe.Slice((*byte)(local), size)
	binary.LittleEndian.PutUint32(rec[0:], tag)
	binary.LittleEndian.PutUint32(rec[4:], uint32(inRing))
	binary.LittleEndian.PutUint32(rec[8:], seq)
	rec[12], rec[13], rec[14], rec[15] = byte(len(head)), flags, byte(len(head2)), 0
	binary.LittleEndian.PutUint64(rec[16:], total)
	copy(rec[recHead:], head)
	copy(rec[recHead+len(head):], head2)
	// A large payload goes from the caller's memory, pinned until the
	// write completes, where the provider needs no registered local
	// buffers; else it is copied into the send ring.
	direct := at != nil || (len(payload) >= directBytes && !w.mrLocal)
	if !direct {
		copy(rec[heads:], payload)
	}
	data := uint64(w.rank)<<rankShift | off/recAlign
	remote := p.base + uint64(w.rank)*w.ring + off
	// A record the provider can inject (a FLAG, a FENCE, an answer) is:
	// it completes as it is posted, so no completion entry follows to
	// wake the progress loop.
	inject := !direct && heads+inRing <= w.injectMax
	for {
		var rc C.ssize_t
		if inject {
			rc = C.mgf_injectbuf(w.f, local, C.size_t(heads+inRing), C.uint64_t(data), C.uint64_t(p.addr),
				C.uint64_t(remote), C.uint64_t(p.key))
			if rc == 0 {
				w.mu.Lock()
				w.completeLocked(si)
				w.mu.Unlock()
				return seq, false, nil
			}
		} else if at != nil {
			rc = C.mgf_writeat(w.f, unsafe.Pointer(&payload[0]), C.size_t(len(payload)), C.uint64_t(at.addr), C.uint64_t(at.key),
				local, C.size_t(heads), w.sendDesc, C.uint64_t(data), C.uint64_t(p.addr), C.uint64_t(remote), C.uint64_t(p.key),
				C.mgf_ctx(w.f, C.int(si)))
		} else if direct {
			rc = C.mgf_writedata2(w.f, local, C.size_t(heads), w.sendDesc, unsafe.Pointer(&payload[0]), C.size_t(len(payload)),
				C.uint64_t(data), C.uint64_t(p.addr), C.uint64_t(remote), C.uint64_t(p.key), C.mgf_ctx(w.f, C.int(si)))
		} else {
			rc = C.mgf_writedata(w.f, local, C.size_t(size), w.sendDesc, C.uint64_t(data), C.uint64_t(p.addr),
				C.uint64_t(remote), C.uint64_t(p.key), C.mgf_ctx(w.f, C.int(si)))
		}
		if rc == 0 {
			// Wake the progress loop: with manual progress the write
			// moves when the completion queue is read.
			w.kick()
			return seq, direct, nil
		}
		if rc != errAgain {
			err := fmt.Errorf("fabric: rank %d: writing %d bytes to rank %d (fi_writedata): %s", w.rank, size, peer, w.strerror(int(rc)))
			w.mu.Lock()
			w.freeSlotLocked(si)
			w.mu.Unlock()
			w.fail(peer, err)
			return 0, false, err
		}
		if err := w.backOff(ctx, peer, si); err != nil {
			return 0, false, err
		}
	}
}

// backOff waits a little after the provider's queue was full (EAGAIN)
// for a write of context slot si to peer, kicking the progress loop to
// drain it; where the peer failed or ctx ended, it gives the slot back
// and says why.
func (w *Wire) backOff(ctx context.Context, peer, si int) error {
	w.mu.Lock()
	if err := w.stateLocked(peer); err != nil {
		w.freeSlotLocked(si)
		w.mu.Unlock()
		return err
	}
	ch := w.changed
	w.mu.Unlock()
	w.kick()
	t := time.NewTimer(50 * time.Microsecond)
	defer t.Stop()
	select {
	case <-ch:
	case <-t.C:
	case <-ctx.Done():
		w.mu.Lock()
		w.freeSlotLocked(si)
		w.mu.Unlock()
		return context.Cause(ctx)
	}
	return nil
}

// freeSlotLocked gives back the context slot si: its write is no longer
// in flight (it completed or failed, or it was not posted because the
// wire closed or the peer failed first). It returns what the slot held.
func (w *Wire) freeSlotLocked(si int) slot {
	s := w.slots[si]
	w.slots[si].used = false
	w.free = append(w.free, si)
	w.inflight--
	w.peers[s.peer].inflight--
	return s
}

// completed waits until the write of record seq to peer completed here
// (its source memory is free again).
func (w *Wire) completed(ctx context.Context, peer int, seq uint32) error {
	p := &w.peers[peer]
	for {
		w.mu.Lock()
		if err := w.stateLocked(peer); err != nil {
			w.mu.Unlock()
			return err
		}
		if p.doneLocked(seq) {
			w.mu.Unlock()
			return nil
		}
		ch := w.changed
		w.mu.Unlock()
		w.kick()
		if err := w.waitChange(ctx, ch, peer, "the completion of a write to"); err != nil {
			return err
		}
	}
}

// completeLocked marks the write of context slot si completed: its
// record is done here, and the slot free (w.mu held).
func (w *Wire) completeLocked(si int) {
	s := w.freeSlotLocked(si)
	if r := w.peers[s.peer].outLocked(s.seq); r != nil {
		r.done = true
	}
}

// outLocked returns the record seq among those on their way to the
// peer, nil if it is not (w.mu held).
func (p *peerOut) outLocked(seq uint32) *outRec {
	for j := range p.out {
		if p.out[j].seq == seq {
			return &p.out[j]
		}
	}
	return nil
}

// doneLocked says whether the write of record seq completed here: it did
// once it is no longer on its way (w.mu held).
func (p *peerOut) doneLocked(seq uint32) bool {
	r := p.outLocked(seq)
	return r == nil || r.done
}

// freeLocked frees the ring space of the records that completed here and
// that the peer consumed.
func (w *Wire) freeLocked(p *peerOut) {
	for len(p.out) > 0 && p.out[0].done && int32(p.credit-p.out[0].seq) >= 0 {
		p.tail = p.out[0].end
		p.out = p.out[1:]
	}
}

// drained waits until every record sent to peer completed and was
// consumed there.
func (w *Wire) drained(ctx context.Context, peer int) error {
	p := &w.peers[peer]
	for {
		w.mu.Lock()
		if err := w.stateLocked(peer); err != nil {
			w.mu.Unlock()
			return err
		}
		w.freeLocked(p)
		if len(p.out) == 0 {
			w.mu.Unlock()
			return nil
		}
		ch := w.changed
		w.mu.Unlock()
		w.kick()
		if err := w.waitChange(ctx, ch, peer, "the writes to"); err != nil {
			return err
		}
	}
}

func (w *Wire) stateLocked(peer int) error {
	switch {
	case w.closed:
		return fmt.Errorf("fabric: rank %d: the wire is closed", w.rank)
	case w.fatal != nil:
		return w.fatal
	case w.peers[peer].err != nil:
		return w.peers[peer].err
	}
	return nil
}

// waitChange waits for ch, the job's end or ctx.
func (w *Wire) waitChange(ctx context.Context, ch chan struct{}, peer int, what string) error {
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-w.net.Context().Done():
		return fmt.Errorf("fabric: rank %d: waiting for %s rank %d: %w", w.rank, what, peer, context.Cause(w.net.Context()))
	}
}

// CanPlace says whether payloads can go straight into a peer's memory
// (SendPortAt): the provider needs no registered local buffers
// (FI_MR_LOCAL unset: tcp, shm) and takes RMA writes of two parts (the
// payload into the peer's memory, the record into its ring).
func (w *Wire) CanPlace() bool { return w.placeOK }

// RegisterPlace registers buf, memory of this process that stays mapped
// until release is called, for peers' writes (SendPortAt): they address
// it as addr + offset with key. The caller calls release before it
// unmaps buf, once no peer writes into it any more.
func (w *Wire) RegisterPlace(buf []byte) (addr, key uint64, release func() error, err error) {
	if !w.placeOK {
		return 0, 0, nil, fmt.Errorf("fabric: rank %d: %s cannot write into peers' memory directly", w.rank, w.prov)
	}
	if len(buf) == 0 {
		return 0, 0, nil, fmt.Errorf("fabric: rank %d: registering 0 bytes", w.rank)
	}
	w.users.RLock()
	defer w.users.RUnlock()
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return 0, 0, nil, fmt.Errorf("fabric: rank %d: the wire is closed", w.rank)
	}
	want := w.nextKey
	w.nextKey++
	w.mu.Unlock()
	var mr, desc unsafe.Pointer
	var k C.uint64_t
	if rc := C.mgf_mr_reg(w.f, unsafe.Pointer(&buf[0]), C.size_t(len(buf)), accRemoteWrite, C.uint64_t(want), &mr, &k, &desc); rc != 0 {
		return 0, 0, nil, fmt.Errorf("fabric: rank %d: registering %d bytes for peers' writes: %s", w.rank, len(buf), w.strerror(int(rc)))
	}
	if w.virtAddr {
		addr = uint64(uintptr(unsafe.Pointer(&buf[0])))
	}
	reg := &placeReg{mr: mr}
	w.mu.Lock()
	w.places[reg] = true
	w.mu.Unlock()
	release = func() error {
		w.users.RLock()
		defer w.users.RUnlock()
		w.mu.Lock()
		open := w.places[reg]
		delete(w.places, reg)
		w.mu.Unlock()
		if !open || w.f == nil {
			return nil // released already, or with the wire
		}
		if rc := C.mgf_mr_close(reg.mr); rc != 0 {
			return fmt.Errorf("fabric: rank %d: releasing a registration for peers' writes: %s", w.rank, w.strerror(int(rc)))
		}
		return nil
	}
	return addr, uint64(k), release, nil
}

// SendPortAt writes payload straight into peer's memory at addr (in a
// region peer registered with RegisterPlace, key) and head, and head2
// where not nil, as SendPort2 sends them without a payload, as one RMA
// write of two parts: the peer receives the messages once the payload
// is in place. It returns once the write completed here (the caller may
// reuse the payload's memory then).
func (w *Wire) SendPortAt(ctx context.Context, peer int, tag uint32, head, payload, head2 []byte, addr, key uint64) error {
	if !w.placeOK {
		return fmt.Errorf("fabric: rank %d: %s cannot write into peers' memory directly", w.rank, w.prov)
	}
	if err := w.checkSend(peer, head, head2); err != nil {
		return err
	}
	p := &w.peers[peer]
	p.send.Lock()
	defer p.send.Unlock()
	flags := byte(recFirst | recLast)
	if head2 != nil {
		flags |= recPair
	}
	var at *placeAt
	if len(payload) > 0 {
		var pin runtime.Pinner
		defer pin.Unpin()
		pin.Pin(&payload[0])
		at = &placeAt{addr, key}
	}
	seq, direct, err := w.post(ctx, peer, tag, flags, head, head2, payload, 0, at)
	if err != nil || !direct {
		return err
	}
	w.assist(func() bool { return w.isDone(peer, seq) })
	return w.completed(ctx, peer, seq)
}

// placeAt is where in a peer's memory a payload goes (SendPortAt).
type placeAt struct{ addr, key uint64 }

// RecvPort returns the next message from peer with tag. A large payload
// is the ring's memory, valid until the next RecvPort for the same peer
// and tag (which releases it to the sender) or until Close.
func (w *Wire) RecvPort(ctx context.Context, peer int, tag uint32) ([]byte, []byte, error) {
	return w.RecvPortTo(ctx, peer, tag, nil)
}

// RecvPortTo is RecvPort, except that dest (where not nil), given the
// header of a message of several records and its payload length n, may
// say where its payload goes: a slice of n bytes, into which the parts
// are copied as they arrive (one copy out of the ring, as for a message
// of one record); the payload returned is then that slice.
func (w *Wire) RecvPortTo(ctx context.Context, peer int, tag uint32, dest func(head []byte, n int) []byte) ([]byte, []byte, error) {
	if peer < 0 || peer >= w.size || peer == w.rank {
		return nil, nil, fmt.Errorf("fabric: rank %d: receive from rank %d of %d", w.rank, peer, w.size)
	}
	k := qkey{tag, peer}
	w.mu.Lock()
	q := w.queueLocked(k)
	if q.held != 0 {
		delete(w.holds[peer], q.held)
		q.held = 0
		w.peers[peer].released = true
		w.mu.Unlock()
		w.kick() // the sender's credit is due (the endpoint stays until RUnlock)
		w.users.RUnlock()
	} else {
		w.mu.Unlock()
	}
	for {
		w.mu.Lock()
		if len(q.msgs) > 0 {
			m := q.msgs[0]
			q.msgs[0] = msg{}
			q.msgs = q.msgs[1:]
			if m.st != nil {
				w.mu.Unlock()
				var buf []byte
				if dest != nil {
					if d := dest(m.head, m.st.total); len(d) == m.st.total {
						buf = d
					}
				}
				payload, err := w.receiveStream(ctx, peer, q, m.st, buf)
				return m.head, payload, err
			}
			if m.hold == 0 {
				w.mu.Unlock()
				return m.head, m.payload, nil
			}
			q.held = m.hold
			w.mu.Unlock()
			// The ring stays until this payload is released.
			w.users.RLock()
			w.mu.Lock()
			closed := w.closed
			if closed {
				delete(w.holds[peer], q.held)
				q.held = 0
			}
			w.mu.Unlock()
			if closed {
				w.users.RUnlock()
				return nil, nil, fmt.Errorf("fabric: rank %d: the wire is closed", w.rank)
			}
			return m.head, m.payload, nil
		}
		if err := w.stateLocked(peer); err != nil {
			w.mu.Unlock()
			return nil, nil, err
		}
		ch := q.changed
		w.mu.Unlock()
		if err := w.waitChange(ctx, ch, peer, "a message from"); err != nil {
			return nil, nil, err
		}
		w.mu.Lock()
		if len(q.msgs) == 0 {
			q.wakes++
		}
		w.mu.Unlock()
	}
}

// receiveStream copies the parts of a message of several records into
// buf (nil: the queue's buffer) as they arrive, releasing each to the
// sender once copied.
func (w *Wire) receiveStream(ctx context.Context, peer int, q *queue, st *stream, buf []byte) ([]byte, error) {
	if buf == nil {
		if cap(q.buf) < st.total {
			q.buf = make([]byte, st.total)
		}
		buf = q.buf[:st.total]
	}
	n, taken := 0, 0
	for n < st.total {
		w.users.RLock() // the ring stays while parts are copied
		w.mu.Lock()
		k := len(st.parts)
		parts, seqs := st.parts[taken:k], st.seqs[taken:k]
		if len(parts) == 0 {
			err := w.stateLocked(peer)
			ch := q.changed
			w.mu.Unlock()
			w.users.RUnlock()
			if err != nil {
				return nil, err
			}
			if err := w.waitChange(ctx, ch, peer, "the rest of a message from"); err != nil {
				return nil, err
			}
			continue
		}
		if w.closed {
			w.mu.Unlock()
			w.users.RUnlock()
			return nil, fmt.Errorf("fabric: rank %d: the wire is closed", w.rank)
		}
		w.mu.Unlock()
		var err error
		for _, p := range parts {
			if n+len(p) > len(buf) {
				err = fmt.Errorf("fabric: rank %d: a message from rank %d of %d bytes brought more", w.rank, peer, st.total)
				break
			}
			n += copy(buf[n:], p)
		}
		w.mu.Lock()
		for _, seq := range seqs {
			delete(w.holds[peer], seq)
		}
		w.peers[peer].released = true
		w.mu.Unlock()
		taken = k
		w.kick() // the sender's credit is due
		w.users.RUnlock()
		if err != nil {
			return nil, err
		}
	}
	return buf, nil
}

func (w *Wire) queueLocked(k qkey) *queue {
	q := w.queues[k]
	if q == nil {
		q = &queue{changed: make(chan struct{})}
		w.queues[k] = q
	}
	return q
}

// notifyLocked wakes the senders (room in a ring, completed writes) and
// every receiver: the wire's or a peer's state changed. handle wakes only
// those its completions concern.
func (w *Wire) notifyLocked() {
	w.notifySendersLocked()
	for _, q := range w.queues {
		q.notifyLocked()
	}
}

// notifySendersLocked wakes the senders.
func (w *Wire) notifySendersLocked() {
	close(w.changed)
	w.changed = make(chan struct{})
}

// notifyLocked wakes q's receiver (w.mu held).
func (q *queue) notifyLocked() {
	close(q.changed)
	q.changed = make(chan struct{})
}

// fail marks peer failed.
func (w *Wire) fail(peer int, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.peers[peer].err == nil {
		w.peers[peer].err = err
	}
	w.notifyLocked()
}

// progress is the wire's one progress loop: it reads the completion
// queue, takes the records that arrived, frees the ring space of those
// consumed, and sends credits.
func (w *Wire) progress() {
	defer close(w.done)
	last := time.Now()     // the last completion, or the last poll with writes of ours on their way
	var byeBy time.Time    // closing: the end of the farewell
	owed := false          // a credit or an answer could not be sent yet
	var creditAt time.Time // when a credit held back for more is due (zero: none)
	gauge := newSpinGauge()
	for {
		if byeBy.IsZero() {
			select {
			case <-w.stop:
				byeBy = time.Now().Add(byeWait)
			default:
			}
		}
		if !byeBy.IsZero() {
			if done := w.farewell(); done || !time.Now().Before(byeBy) {
				w.endFarewell(done)
				return
			}
		}
		// The receive side's state (what take records, the credits it
		// owes) is cqMu's: a sender's assist may take records too.
		w.cqMu.Lock()
		n, _ := w.readLocked()
		if n >= 0 || n == errAgain || n == errAvail {
			owed, creditAt = w.sendCredits()
			owed = w.sendAcks() || owed
		}
		w.cqMu.Unlock()
		switch {
		case n > 0:
			now := time.Now()
			gauge.observe(now)
			last = now
		case n == errAvail:
			last = time.Now()
		case n == errAgain || n == 0:
			w.idle(&last, owed || !byeBy.IsZero(), creditAt, gauge.worth())
		default:
			w.mu.Lock()
			w.fatal = fmt.Errorf("fabric: rank %d: reading the completion queue: %s", w.rank, w.strerror(n))
			w.notifyLocked()
			w.mu.Unlock()
			return
		}
	}
}

// endFarewell records, as the progress loop ends, whether the farewell
// ended with every peer (done) in a job that lost no rank, no peer
// failed and no write is on its way: else Close leaves the endpoint.
func (w *Wire) endFarewell(done bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.unclean = !done || w.net.Context().Err() != nil
	for r := range w.peers {
		if p := &w.peers[r]; r != w.rank && ((p.err != nil && !p.gone) || p.inflight > 0) {
			w.unclean = true
		}
	}
}

// readLocked reads the completion queue once and handles what it read
// (cqMu held): it returns fi_cq_read's result, and whether a peer's
// write was among the completions.
func (w *Wire) readLocked() (int, bool) {
	n := int(C.mgf_cq_read(w.f, &w.cqe[0], C.size_t(len(w.cqe))))
	switch {
	case n > 0:
		remote := false
		for _, e := range w.cqe[:n] {
			if uint64(e.flags)&flagRemoteData != 0 {
				remote = true
			}
		}
		w.handle(w.cqe[:n])
		return n, remote
	case n == errAvail:
		w.readErr()
	}
	return n, false
}

// assist looks for the completion of a write of this sender (done says
// whether it came) in the completion queue itself, for up to assistFor, where the
// progress loop is not reading it: with the tcp provider a write that
// the socket took whole has completed by the time it is posted, and the
// sender then returns without waiting for the loop to wake, read and
// wake it (two hand-overs between goroutines on the critical path of
// every large put). A peer's write read here wakes the loop, which
// sends the credits and answers.
func (w *Wire) assist(done func() bool) {
	w.users.RLock()
	defer w.users.RUnlock()
	w.mu.Lock()
	closed := w.closed
	w.mu.Unlock()
	if closed {
		return
	}
	var until time.Time
	for {
		if w.cqMu.TryLock() {
			n, remote := w.readLocked()
			w.cqMu.Unlock()
			if remote {
				w.wake()
			}
			if n > 0 && done() {
				w.assisted.Add(1)
				return
			}
		}
		now := time.Now()
		if until.IsZero() {
			until = now.Add(assistFor)
		} else if now.After(until) {
			return
		}
		runtime.Gosched()
	}
}

// isDone says whether the write of record seq to peer completed.
func (w *Wire) isDone(peer int, seq uint32) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.peers[peer].doneLocked(seq)
}

// idle paces the progress loop when the completion queue is empty (see
// spinFor): last is the time of the last activity; more says the loop
// has work left of its own (closing, a credit to retry); creditAt, where
// not zero, when a credit held back for more is due (the sleep ends
// then; a provider without a wait object is polled until then); eager
// that spinning and polling pay here (spinGauge): else the loop sleeps
// on the wait object at once. Before, a credit held back kept the loop
// polling every pollEvery for up to creditDelay after most messages.
// Writes of its own on their way do not keep it spinning: with 4
// processes on 2 cores, a loop that spun (runtime.Gosched) for as long
// as a large write took burnt the core the peers needed.
func (w *Wire) idle(last *time.Time, more bool, creditAt time.Time, eager bool) {
	now := time.Now()
	if more {
		*last = now
	}
	quiet := now.Sub(*last)
	switch {
	case (eager || more) && quiet <= spinFor:
		w.spins.Add(1)
		runtime.Gosched()
	case (eager && quiet <= pollFor) || (!creditAt.IsZero() && w.cqConn == nil):
		time.Sleep(pollEvery)
	default:
		// Say so before the last look: a sender that posts after it
		// sees sleeping and wakes the loop.
		w.sleeping.Store(true)
		w.mu.Lock()
		bound := blockFor
		if w.inflight > 0 {
			bound = writeBlock
		}
		w.mu.Unlock()
		if !creditAt.IsZero() {
			bound = min(bound, time.Until(creditAt))
		}
		stopping := bound <= 0 // the credit is due: send it first
		select {
		case <-w.stop:
			stopping = true
		default:
		}
		if !stopping && w.cqConn != nil {
			// Go's poller: fn runs now and whenever the wait object polls
			// readable; true ends the wait.
			// A sleep that ended at its bound is no activity: the loop
			// goes back to sleep after one look instead of spinning.
			_ = w.cqFile.SetReadDeadline(time.Now().Add(bound))
			if w.cqConn.Read(func(uintptr) bool {
				return w.woken.Swap(false) || C.mgf_trywait(w.f) != 0
			}) == nil {
				*last = time.Now()
			}
		} else if !stopping {
			switch C.mgf_block(w.f, C.int(bound/time.Millisecond)) {
			case -1: // no wait object: poll
				if quiet > restAfter {
					time.Sleep(restEvery)
				} else {
					time.Sleep(pollEvery)
				}
			case 1:
				*last = time.Now()
			}
		}
		w.sleeping.Store(false)
	}
}

// spinGauge says whether the progress loop's spinning pays: whether the
// completions of this process tend to follow each other within spinFor
// (a round trip between two ranks: 94% of them in the wire benchmark),
// or not (a plan of 4 processes on 2 cores: 33% to 45%, the rest 0.1 to
// 2 ms apart, where a loop that spins for 100 us after each, and polls
// for 2 ms, takes the core that the ranks of the other processes need:
// make bench-fabric's allreduce_hier 4M launch went from about 15 ms to
// 12 ms, the TCP wire's, without them). It keeps an average of the
// gaps that are under sampleMax (longer ones are idle time, between
// launches), each counted as a hit (within spinFor) or a miss. Where
// the loop does not spin, a hit is a gap within recoverFor: without the
// spin a round trip's completions come up to about 200 us apart (the
// wake-up through the poller), and the loop must find its way back to
// spinning there (a plan's gaps stay mostly longer).
type spinGauge struct {
	last time.Time
	hits float64 // the average, 0 to 1
}

const (
	sampleMax  = 2 * time.Millisecond
	recoverFor = 250 * time.Microsecond
	gaugeGain  = 1.0 / 8 // the weight of a new gap
	spinWorth  = 0.6     // the average above which the loop spins
)

// newSpinGauge starts eager: a round trip needs the spin from its first
// message.
func newSpinGauge() *spinGauge { return &spinGauge{hits: 1} }

// observe takes the time of a completion.
func (g *spinGauge) observe(now time.Time) {
	if !g.last.IsZero() {
		if gap := now.Sub(g.last); gap <= sampleMax {
			within := spinFor
			if !g.worth() {
				within = recoverFor
			}
			hit := 0.0
			if gap <= within {
				hit = 1
			}
			g.hits += (hit - g.hits) * gaugeGain
		}
	}
	g.last = now
}

// worth says whether to spin and poll after a completion.
func (g *spinGauge) worth() bool { return g.hits >= spinWorth }

// kick wakes the progress loop where it sleeps: work for it was posted.
//
// It holds users (read) while it signals the completion queue: a waiter
// that kicks outside a post could otherwise signal a queue that Close
// is freeing (a crash inside libfabric's close under load, in the
// link-down tests). Close only ever tries users (TryLock), so a kick
// by a holder of users cannot deadlock with it.
func (w *Wire) kick() {
	if !w.sleeping.Load() {
		return
	}
	w.users.RLock()
	defer w.users.RUnlock()
	if w.f != nil {
		w.wake()
	}
}

// wake ends the progress loop's sleep, now or the next one.
func (w *Wire) wake() {
	if w.cqConn != nil {
		w.woken.Store(true)
		C.mgf_cq_signal(w.f)
		return
	}
	C.mgf_wake(w.f)
}

// pollable registers a duplicate of the completion queue's wait object
// fd with Go's network poller; nil where there is none or it cannot be
// (MSCCLGO_FABRIC_WAIT=thread keeps the sleep in a blocked thread).
func pollable(fd int) (*os.File, syscall.RawConn) {
	if fd < 0 || os.Getenv("MSCCLGO_FABRIC_WAIT") == "thread" {
		return nil, nil
	}
	d, err := syscall.Dup(fd)
	if err != nil {
		return nil, nil
	}
	syscall.CloseOnExec(d)
	if err := syscall.SetNonblock(d, true); err != nil {
		syscall.Close(d)
		return nil, nil
	}
	f := os.NewFile(uintptr(d), "libfabric completion queue")
	rc, err := f.SyscallConn()
	if err != nil || f.SetReadDeadline(time.Time{}) != nil { // not in the poller
		f.Close()
		return nil, nil
	}
	return f, rc
}

// inject writes remote CQ data to peer r (its receive region's spare
// word): 0, errAgain, or a failure.
func (w *Wire) inject(r int, data uint64) int {
	p := &w.peers[r]
	remote := p.base + uint64(w.size)*w.ring
	return int(C.mgf_injectdata(w.f, 0, C.uint64_t(data), C.uint64_t(p.addr), C.uint64_t(remote), C.uint64_t(p.key)))
}

// sendAcks answers the peers that said bye, once no write to them is
// being posted: after the answer nothing of this rank reaches them.
func (w *Wire) sendAcks() (owed bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for r := range w.peers {
		p := &w.peers[r]
		if !p.ackOwed || p.posting > 0 || p.inflight > 0 {
			continue
		}
		if rc := w.inject(r, cqCtl|uint64(w.rank)<<rankShift|ctlAck); rc != errAgain {
			p.ackOwed = false
		} else {
			owed = true
		}
	}
	return owed
}

// farewell (the progress loop of a closed wire) says bye to every peer
// that did not say it first, once no write to it is being posted, and
// reports whether every peer answered (or cannot be reached) and every
// bye of a peer is answered: then no peer of this process touches the
// endpoint any more.
func (w *Wire) farewell() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	// A job that lost a rank (the bootstrap's context ended) says no
	// bye: its processes are ending, and the providers' handling of a
	// dead peer's connection while the loop goes on crashed (tcp;ofi_rxm,
	// TestFabricKilledRank). A peer whose writes failed is not reached
	// either.
	lost := w.net.Context().Err() != nil
	done := true
	for r := range w.peers {
		p := &w.peers[r]
		if r == w.rank {
			continue
		}
		// A peer that said bye still gets its answer, once the writes to
		// it completed: it frees its endpoint on that answer, and our
		// writes on their way touch it.
		if lost || (p.err != nil && !p.gone) {
			p.bye, p.ackOwed = byeDone, false
			continue
		}
		if p.bye == byeNone && !p.gone && p.posting == 0 && p.inflight == 0 {
			switch rc := w.inject(r, cqCtl|uint64(w.rank)<<rankShift|ctlBye); rc {
			case 0:
				p.bye = byeSent
			case errAgain:
			default:
				p.bye = byeDone // unreachable: it will not write here either
			}
		}
		if p.ackOwed || (p.bye == byeNone && !p.gone) || p.bye == byeSent {
			done = false
		}
	}
	return done
}

func (w *Wire) handle(es []C.mgf_cqe) {
	var got []qmsg
	var parts []streamPart
	senders, all := false, false // whom to wake besides the queues that got traffic
	w.mu.Lock()
	for _, e := range es {
		if uint64(e.flags)&flagRemoteData == 0 {
			// A write of ours completed.
			i := int(C.mgf_ctx_index(w.f, e.ctx))
			if i < 0 || !w.slots[i].used {
				continue
			}
			senders = true
			w.completeLocked(i)
			w.completions.Add(1)
			continue
		}
		d := uint32(e.data)
		from := int(d >> rankShift & (maxRanks - 1))
		if from >= w.size || from == w.rank {
			continue
		}
		if d&cqCtl != 0 {
			all = true // a peer's state: its receivers and senders see it
			p := &w.peers[from]
			switch d & lowMask {
			case ctlBye:
				p.gone, p.ackOwed = true, true
				if p.err == nil {
					p.err = fmt.Errorf("fabric: rank %d: rank %d closed its wire", w.rank, from)
				}
			case ctlAck:
				p.bye = byeDone
			}
			continue
		}
		if d&cqCredit != 0 {
			senders = true
			p := &w.peers[from]
			c := p.credit + (d-p.credit)&lowMask
			if int32(p.seq-c) >= 0 {
				p.credit = c
			}
			continue
		}
		w.mu.Unlock()
		got = append(got, w.take(from, uint64(d&lowMask)*recAlign, &parts)...)
		w.mu.Lock()
	}
	// Each queue that got traffic is woken once (a queue's channel is
	// replaced at every wake, so collect them first).
	var woken []*queue
	wake := func(q *queue) {
		for _, o := range woken {
			if o == q {
				return
			}
		}
		woken = append(woken, q)
	}
	for _, sp := range parts {
		sp.st.parts = append(sp.st.parts, sp.body)
		sp.st.seqs = append(sp.st.seqs, sp.seq)
		w.holds[sp.from][sp.seq] = true
		wake(w.queueLocked(sp.st.key))
	}
	for _, m := range got {
		q := w.queueLocked(qkey{m.tag, m.from})
		q.msgs = append(q.msgs, m.msg)
		if m.hold != 0 {
			w.holds[m.from][m.hold] = true
		}
		wake(q)
	}
	switch {
	case all:
		w.notifyLocked()
	case senders:
		w.notifySendersLocked()
	}
	if !all {
		for _, q := range woken {
			q.notifyLocked()
		}
	}
	w.mu.Unlock()
}

type qmsg struct {
	tag  uint32
	from int
	msg
}

// take takes the record at off of from's ring, and any that waited for
// it, in sequence order; it returns the messages they begin, and adds
// the records of messages of several records to parts.
func (w *Wire) take(from int, off uint64, parts *[]streamPart) []qmsg {
	in := &w.ins[from]
	ring := unsafe.Slice((*byte)(unsafe.Add(w.recvMem, uint64(from)*w.ring)), w.ring)
	if off+recHead > w.ring {
		return nil
	}
	seq := binary.LittleEndian.Uint32(ring[off+8:])
	in.pending[seq] = uint32(off)
	var out []qmsg
	for {
		o, ok := in.pending[in.expect]
		if !ok {
			return out
		}
		delete(in.pending, in.expect)
		r := ring[o:]
		tag := binary.LittleEndian.Uint32(r[0:])
		pl := int(binary.LittleEndian.Uint32(r[4:]))
		hl, h2 := int(r[12]), int(r[14])
		flags := r[13]
		if end := recHead + hl + h2 + pl; uint64(o)+uint64(end) <= w.ring {
			body := r[recHead+hl+h2 : end : end]
			first := flags&recFirst != 0
			if first {
				m := msg{head: append([]byte(nil), r[recHead:recHead+hl]...)}
				switch {
				case flags&recLast == 0:
					// Several records: the receiver copies them as they
					// come.
					in.st = &stream{key: qkey{tag, from}, total: int(min(binary.LittleEndian.Uint64(r[16:]), 1<<32))}
					m.st = in.st
				case pl >= directBytes:
					// A large message of one record: the receiver reads
					// it in the ring, which it holds until its next
					// RecvPort.
					m.payload, m.hold = body, in.expect
				default:
					m.payload = append([]byte(nil), body...)
					w.loopCopied.Add(uint64(pl))
				}
				out = append(out, qmsg{tag: tag, from: from, msg: m})
				if flags&recPair != 0 {
					out = append(out, qmsg{tag: tag, from: from, msg: msg{head: append([]byte(nil), r[recHead+hl:recHead+hl+h2]...)}})
				}
			}
			if in.st != nil && (!first || flags&recLast == 0) {
				*parts = append(*parts, streamPart{st: in.st, from: from, seq: in.expect, body: body})
				if flags&recLast != 0 {
					in.st = nil
				}
			}
		}
		w.peers[from].creditDue = in.expect
		w.peers[from].creditBytes += uint64(recHead+hl+h2+pl+recAlign-1) &^ (recAlign - 1)
		in.expect++
	}
}

// sendCredits tells each peer how far this rank consumed its ring: up to
// the record before the first one a receiver still holds.
func (w *Wire) sendCredits() (owed bool, creditAt time.Time) {
	var now time.Time
	for r := range w.peers {
		p := &w.peers[r]
		if r == w.rank {
			continue
		}
		due := p.creditDue
		w.mu.Lock()
		if p.gone || p.bye != byeNone {
			w.mu.Unlock()
			continue
		}
		for seq := range w.holds[r] {
			if int32(seq-1-due) < 0 {
				due = seq - 1
			}
		}
		released := p.released
		w.mu.Unlock()
		if due == p.credSeq {
			continue
		}
		if now.IsZero() {
			now = time.Now()
		}
		if p.owedSince.IsZero() {
			p.owedSince = now
		}
		if !released && p.creditBytes < w.ring/creditEvery && now.Sub(p.owedSince) < creditDelay {
			// With more, or after creditDelay.
			if at := p.owedSince.Add(creditDelay); creditAt.IsZero() || at.Before(creditAt) {
				creditAt = at
			}
			continue
		}
		w.mu.Lock()
		p.released = false
		w.mu.Unlock()
		rc := w.inject(r, uint64(cqCredit)|uint64(w.rank)<<rankShift|uint64(due&lowMask))
		switch {
		case rc == 0:
			p.credSeq, p.creditBytes, p.owedSince = due, 0, time.Time{}
		case rc == errAgain:
			owed = true
		default:
			w.fail(r, fmt.Errorf("fabric: rank %d: crediting rank %d (fi_injectdata): %s", w.rank, r, w.strerror(int(rc))))
			p.credSeq = due
		}
	}
	return owed, creditAt
}

// readErr reads an error completion and fails the peer it concerns.
func (w *Wire) readErr() {
	var ctx unsafe.Pointer
	var e C.int
	var buf [256]C.char
	if rc := C.mgf_cq_readerr(w.f, &ctx, &e, &buf[0], C.size_t(len(buf))); rc != 0 {
		return
	}
	desc := C.GoString(&buf[0])
	i := int(C.mgf_ctx_index(w.f, ctx))
	w.mu.Lock()
	defer w.mu.Unlock()
	if i < 0 || !w.slots[i].used {
		if w.fatal == nil {
			w.fatal = fmt.Errorf("fabric: rank %d: %s: %s", w.rank, w.strerror(int(e)), desc)
		}
		w.notifyLocked()
		return
	}
	s := w.freeSlotLocked(i)
	p := &w.peers[s.peer]
	if p.err == nil {
		p.err = fmt.Errorf("fabric: rank %d: a write to rank %d failed over %s: %s: %s", w.rank, s.peer, w.prov, w.strerror(int(e)), desc)
	}
	w.notifyLocked()
}

// Close stops the progress loop and releases the endpoint and memory.
func (w *Wire) Close() error {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return nil
	}
	w.closed = true
	w.notifyLocked()
	w.mu.Unlock()
	close(w.stop)
	w.wake()
	select {
	case <-w.done:
	case <-time.After(5 * time.Second):
		return fmt.Errorf("fabric: rank %d: the progress loop did not stop within 5s", w.rank)
	}
	// Wait for the writes being posted (they see closed and stop) and
	// for the receivers to release the payloads they hold (at their next
	// RecvPort, which fails now). One that does not within 5 s keeps
	// the memory until the process ends.
	deadline := time.Now().Add(5 * time.Second)
	for !w.users.TryLock() {
		if time.Now().After(deadline) {
			return fmt.Errorf("fabric: rank %d: closing: a receiver still holds a message after 5s; the wire's memory stays until the process ends", w.rank)
		}
		time.Sleep(time.Millisecond)
	}
	defer w.users.Unlock()
	w.mu.Lock()
	unclean := w.unclean
	w.mu.Unlock()
	if unclean {
		// libfabric's tcp provider crashed (SIGSEGV inside fi_close)
		// closing an endpoint whose connection to a peer broke with
		// writes on it: TestFabricLinkDown and TestNamespaceLinkDown
		// with other tests loading the cores, 2 to 5 runs of 15. The
		// process is ending.
		w.closeWaitFile()
		return nil
	}
	w.release()
	return nil
}

// closeWaitFile closes the poller's duplicate of the completion queue's
// wait object.
func (w *Wire) closeWaitFile() {
	if w.cqFile != nil {
		w.cqFile.Close()
		w.cqFile, w.cqConn = nil, nil
	}
}

func (w *Wire) release() {
	for reg := range w.places {
		C.mgf_mr_close(reg.mr)
		delete(w.places, reg)
	}
	if w.cqe != nil {
		C.free(unsafe.Pointer(&w.cqe[0]))
		w.cqe = nil
	}
	w.closeWaitFile()
	if w.recvMR != nil {
		C.mgf_mr_close(w.recvMR)
	}
	if w.sendMR != nil {
		C.mgf_mr_close(w.sendMR)
	}
	if w.f != nil {
		C.mgf_close(w.f)
		w.f = nil
	}
	if w.recvMem != nil {
		C.mgf_free(w.recvMem, C.size_t(w.recvLen))
	}
	if w.sendMem != nil {
		C.mgf_free(w.sendMem, C.size_t(w.sendLen))
	}
	w.recvMem, w.sendMem, w.recvMR, w.sendMR = nil, nil, nil, nil
}

// libName is the library to load: MSCCLGO_LIBFABRIC (a file name or
// path, for a libfabric outside the loader's path, such as the EFA
// installer's), else libfabric.so.1. The caller frees the C string.
func libName() *C.char {
	name := os.Getenv("MSCCLGO_LIBFABRIC")
	if name == "" {
		name = "libfabric.so.1"
	}
	return C.CString(name)
}

// Available reports whether libfabric loads here and offers provider (""
// for any) with RDM endpoints and RMA writes, and if not, why.
func Available(provider string) (string, error) {
	f, err := openFabric(provider, 1)
	if err != nil {
		return "", err
	}
	defer C.mgf_close(f)
	return C.GoString(C.mgf_provider(f)), nil
}

// openFabric loads libfabric and opens an endpoint of provider ("" for
// libfabric's choice) with contexts write contexts; the error is the
// shim's reason.
func openFabric(provider string, contexts C.int) (*C.mgf, error) {
	var cprov *C.char
	if provider != "" {
		cprov = C.CString(provider)
		defer C.free(unsafe.Pointer(cprov))
	}
	lib := libName()
	defer C.free(unsafe.Pointer(lib))
	var ebuf [512]C.char
	f := C.mgf_open(lib, cprov, nil, contexts, &ebuf[0], C.size_t(len(ebuf)))
	if f == nil {
		msg := C.GoString(&ebuf[0])
		if env := os.Getenv("FI_PROVIDER"); provider == "" && env != "" {
			// libfabric narrowed its choice to what the variable names.
			msg += fmt.Sprintf(" (FI_PROVIDER=%q narrows libfabric to that provider: is it one this libfabric has? fi_info -l lists them)", env)
		}
		return nil, errors.New(msg)
	}
	return f, nil
}
