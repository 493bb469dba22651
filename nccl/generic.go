package main

// generic.go: the built-in path, for calls on host memory that no plan
// serves: world sizes the plan set has no plans for (3, 5, 6, 7 ranks,
// say), data types plans do not compute (int8, uint8, uint32, int64,
// uint64, float64), an empty or unreadable plan set. It is a direct
// exchange, every element reduced in rank order (rank 0's input, then
// rank 1's, ...), so every rank gets the same bits:
//   - ranks as threads (a hub): the last rank to arrive reduces every
//     rank's input into each output, in memory;
//   - ranks as processes: over the communicator's bootstrap, each rank
//     reduces one block of the elements (allreduce: an n-th of them;
//     reducescatter: its own) from its peers' sends, and sends the result
//     to every rank (allreduce) or keeps it (reducescatter); allgather
//     sends each rank's input to every rank. Each rank sends and receives
//     about twice its buffer (allreduce), once (the others).

/*
#include "shim.h"
*/
import "C"

import (
	"context"
	"encoding/binary"
	"fmt"
)

// genericTag is the bootstrap tag of the built-in path's messages,
// apart from the plan sessions' (hostTag, deviceTag and up).
const genericTag = 3 << 29

// genericLocal runs one call of every rank of a hub (all, by rank) by
// the built-in path: count elements of type dt per rank block.
func genericLocal(ctx context.Context, coll collective, dt int, count uint64, all []hostPart) error {
	if err := context.Cause(ctx); err != nil {
		return err
	}
	n := len(all)
	b := count * elemSize(dt)
	switch coll {
	case collAllGather:
		for r, p := range all {
			for _, q := range all {
				copy(q.recv[uint64(r)*b:uint64(r+1)*b], p.send)
			}
		}
		return nil
	case collAllReduce:
		acc := reduceBlocks(dt, all, func(r int) []byte { return all[r].send })
		for _, q := range all {
			copy(q.recv, acc)
		}
		return nil
	}
	// reducescatter: rank j's output is block j reduced; each block is
	// reduced whole before its output (which may alias it) is written.
	for j := range n {
		at := uint64(j) * b
		acc := reduceBlocks(dt, all, func(r int) []byte { return all[r].send[at : at+b] })
		copy(all[j].recv, acc)
	}
	return nil
}

// reduceBlocks reduces the blocks block(r) of every rank of all, in rank
// order, each rank's pre-multiplied by its own scalar, the result
// divided as the reduction says.
func reduceBlocks(dt int, all []hostPart, block func(r int) []byte) []byte {
	red := all[0].red
	first := block(0)
	acc := make([]byte, len(first))
	stageInput(dt, all[0].red, acc, first)
	var tmp []byte
	for r := 1; r < len(all); r++ {
		in := block(r)
		if all[r].red.preMul != nil {
			if tmp == nil {
				tmp = make([]byte, len(in))
			}
			mulScalar(dt, tmp, in, all[r].red.preMul)
			in = tmp
		}
		combine(dt, red.op, acc, acc, in)
	}
	if red.postDiv > 0 {
		divide(dt, acc, red.postDiv)
	}
	return acc
}

// frame is a built-in path message: the call's signature, then payload.
func frame(sig string, payload []byte) []byte {
	m := binary.LittleEndian.AppendUint32(make([]byte, 0, 4+len(sig)+len(payload)), uint32(len(sig)))
	return append(append(m, sig...), payload...)
}

// genericProcs runs this rank's part of call k by the built-in path over
// the bootstrap (ranks as processes; the caller holds the rank's host
// call lock). sig is the call as every rank must make it.
func (c *comm) genericProcs(k call, red reduction, sig string, send, recv []byte) error {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	n, me := c.size, c.rank
	es := elemSize(k.dtype)
	fail := func(err error) error {
		return fmt.Errorf("rank %d of %d: %s (the built-in path, with no plan): %w", me, n, sig, err)
	}
	sendTo := func(peer int, payload []byte) error {
		if err := c.boot.Send(ctx, peer, genericTag, frame(sig, payload)); err != nil {
			return fail(err)
		}
		return nil
	}
	recvFrom := func(peer int, want uint64) ([]byte, error) {
		m, err := c.boot.Recv(ctx, peer, genericTag)
		if err != nil {
			return nil, fail(err)
		}
		if len(m) < 4 || uint64(len(m)) < 4+uint64(binary.LittleEndian.Uint32(m)) {
			return nil, fail(errorf(resultInternal, "a message of %d bytes from rank %d is not a built-in path message", len(m), peer))
		}
		l := binary.LittleEndian.Uint32(m)
		if theirs := string(m[4 : 4+l]); theirs != sig {
			return nil, errorf(resultInvalidUsage, "mismatched calls: rank %d called %s, rank %d called %s", me, sig, peer, theirs)
		}
		payload := m[4+l:]
		if uint64(len(payload)) != want {
			return nil, fail(errorf(resultInternal, "rank %d sent %d bytes, want %d", peer, len(payload), want))
		}
		return payload, nil
	}
	// reduce reduces the blocks of every rank, own being this rank's
	// (pre-multiplied here; the peers pre-multiply theirs before sending).
	reduce := func(own []byte) ([]byte, error) {
		var acc []byte
		for r := range n {
			var in []byte
			if r == me {
				in = make([]byte, len(own))
				stageInput(k.dtype, red, in, own)
			} else {
				var err error
				if in, err = recvFrom(r, uint64(len(own))); err != nil {
					return nil, err
				}
			}
			if acc == nil {
				acc = in
				continue
			}
			combine(k.dtype, red.op, acc, acc, in)
		}
		if red.postDiv > 0 {
			divide(k.dtype, acc, red.postDiv)
		}
		return acc, nil
	}
	scaled := func(in []byte) []byte {
		if red.preMul == nil {
			return in
		}
		out := make([]byte, len(in))
		mulScalar(k.dtype, out, in, red.preMul)
		return out
	}
	b := k.count * es
	switch k.coll {
	case collAllGather:
		for j := range n {
			if j != me {
				if err := sendTo(j, send); err != nil {
					return err
				}
			}
		}
		copy(recv[uint64(me)*b:], send)
		for r := range n {
			if r == me {
				continue
			}
			got, err := recvFrom(r, b)
			if err != nil {
				return err
			}
			copy(recv[uint64(r)*b:], got)
		}
		return nil
	case collReduceScatter:
		for j := range n {
			if j != me {
				at := uint64(j) * b
				if err := sendTo(j, scaled(send[at:at+b])); err != nil {
					return err
				}
			}
		}
		acc, err := reduce(send[uint64(me)*b : uint64(me+1)*b])
		if err != nil {
			return err
		}
		copy(recv, acc)
		return nil
	}
	// allreduce: rank j reduces elements [lo(j), lo(j+1)).
	lo := func(j int) uint64 { return k.count * uint64(j) / uint64(n) * es }
	for j := range n {
		if j != me {
			if err := sendTo(j, scaled(send[lo(j):lo(j+1)])); err != nil {
				return err
			}
		}
	}
	acc, err := reduce(send[lo(me):lo(me+1)])
	if err != nil {
		return err
	}
	for j := range n {
		if j != me {
			if err := sendTo(j, acc); err != nil {
				return err
			}
		}
	}
	copy(recv[lo(me):], acc)
	for r := range n {
		if r == me {
			continue
		}
		got, err := recvFrom(r, lo(r+1)-lo(r))
		if err != nil {
			return err
		}
		copy(recv[lo(r):], got)
	}
	return nil
}

// emptyCall reports whether call k has no elements: for every
// collective, ncclSend and ncclRecv, a no-op that succeeds once its
// arguments passed checkCall (nothing is run, forwarded or compared, its
// buffers, NULL or not, are not read: a zero-element tensor's data
// pointer may be NULL).
func (c *comm) emptyCall(k call) bool {
	if k.count != 0 {
		return false
	}
	if logging() {
		logInfo("%s: no elements: nothing to do", c.describe(k))
	}
	return true
}

// defers reports whether call k, made inside a group, is kept to the
// group's end (decision d): where its plan runs on the device, or where
// it runs on host memory (a plan or the built-in path), whose ranks of
// one thread's group must meet concurrently.
func (c *comm) defers(k call, d decision) bool {
	switch {
	case d.plan != "" && c.gpu != nil:
		return true
	case d.plan != "" || d.generic:
		return c.hostRunnable(k)
	}
	return false
}

// runGeneric runs call k, which no plan serves (decision d), by the
// built-in path on host memory. done is false, with the reason, where it
// cannot run there; res is the call's result otherwise.
func (c *comm) runGeneric(k call, d decision) (done bool, res C.int, reason string) {
	ran, err, why := c.runOnHost(k, d)
	if !ran {
		if !k.hostMem && !hostMemEnabled() {
			return false, 0, "the built-in path (no plan) runs on host memory only, not on a device (mscclgoExecuteHost; MSCCLGO_NCCL_HOSTMEM=1 where device pointers are host memory)"
		}
		return false, 0, "the built-in path (no plan) cannot run: " + why
	}
	if logging() {
		logInfo("%s: no plan (%s): the built-in path on host memory", c.describe(k), d.why)
	}
	return true, answer(k.fn, err), ""
}
