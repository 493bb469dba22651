// This file tests that a job of mscclgoCommInitEnv communicators (no
// MSCCLGO_JOB_TOKEN, rank 0 at MASTER_ADDR:MASTER_PORT) admits only its
// own ranks: a stranger that reaches rank 0's port first, claiming rank
// 1, is refused and never sees the rank table, while the real ranks
// complete; and rank 0 listens only on the address it is given.

package main

import (
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// bootFrame lays out one bootstrap frame by hand (the bootstrap package's
// wire format: "MSGO", version, kind, 2 reserved bytes, tag, arg,
// payload length, all big-endian).
func bootFrame(version, kind byte, payload []byte) []byte {
	b := make([]byte, 24, 24+len(payload))
	copy(b, "MSGO")
	b[4], b[5] = version, kind
	binary.BigEndian.PutUint64(b[16:], uint64(len(payload)))
	return append(b, payload...)
}

// strangerHello is a hello claiming rank of a job of size ranks, as a
// process without the job's secret can send it: in the protocol before
// the proofs (version 1, an empty token: what main's rank 0 accepted),
// and in this build's (version 2, its proof all zeros, no challenge
// first).
func strangerHello(version byte, rank, size uint32) []byte {
	var p []byte
	p = binary.BigEndian.AppendUint32(p, rank)
	p = binary.BigEndian.AppendUint32(p, size)
	p = binary.BigEndian.AppendUint32(p, uint32(rank))
	p = binary.BigEndian.AppendUint32(p, size)
	for _, s := range []string{"stranger", "127.0.0.1:1"} {
		p = binary.BigEndian.AppendUint16(p, uint16(len(s)))
		p = append(p, s...)
	}
	if version == 1 {
		p = binary.BigEndian.AppendUint16(p, 0) // the token
	} else {
		p = append(p, make([]byte, 32)...) // the proof
	}
	return bootFrame(version, 1, p)
}

// dialUntil connects to addr, retrying for up to 30 s while it refuses
// (rank 0 has not started listening yet).
func dialUntil(t *testing.T, addr string) net.Conn {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			return c
		}
		if time.Now().After(deadline) {
			t.Fatalf("rank 0 never listened at %s: %v", addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// envJob returns the environment of rank r of a two-rank
// mscclgoCommInitEnv job with rank 0 at addr:port and no job token.
func envJob(r int, addr, port, plans string) []string {
	return []string{fmt.Sprintf("RANK=%d", r), "WORLD_SIZE=2", fmt.Sprintf("LOCAL_RANK=%d", r), "LOCAL_WORLD_SIZE=2",
		"MASTER_ADDR=" + addr, "MASTER_PORT=" + port, "NCCLCHECK_PLANS=" + plans}
}

// checkCustomRuns checks that each rank of a custom job ran its host
// collectives.
func checkCustomRuns(t *testing.T, runs []run) {
	t.Helper()
	for rank, r := range runs {
		for _, s := range []string{
			fmt.Sprintf("rank %d: size 2, 1 plans registered", rank),
			fmt.Sprintf("rank %d: DATA mscclgoExecuteHost round 2 ok", rank),
		} {
			if !strings.Contains(r.stdout, s) {
				t.Errorf("rank %d: output lacks %q:\n%s", rank, s, r.stdout)
			}
		}
	}
}

// TestAuthStrangerRefused: strangers connect to rank 0's port before
// rank 1 starts, each claiming rank 1 without the job's secret: one in
// the protocol before the proofs, one in this build's. Each is answered
// by a fail frame (never the rank table), and the real ranks complete.
// (Before, the first stranger took rank 1's place, rank 0 sent it the
// rank table and the real rank 1 was refused as joining twice.)
func TestAuthStrangerRefused(t *testing.T) {
	artifacts(t) // built before rank 0 starts: the strangers wait 30 s for it
	plans := bundledPlans(t, map[string]planDef{"allreduce.json": {"allreduce_packet", map[string]string{"world_size": "2"}}})
	port := freePort(t)
	master := net.JoinHostPort("127.0.0.1", port)
	runs := make([]run, 2)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		runs[0] = runCheck(t, envJob(0, "127.0.0.1", port, plans), "custom")
	}()
	strangers := []struct {
		name  string
		hello []byte
		want  string // in the fail frame
	}{
		{"protocol version 1, no token", strangerHello(1, 1, 2), "protocol version 1"},
		{"protocol version 2, no proof", strangerHello(2, 1, 2), "did not prove this job's secret"},
	}
	conns := make([]net.Conn, len(strangers))
	for i, s := range strangers {
		conns[i] = dialUntil(t, master)
		defer conns[i].Close()
		if _, err := conns[i].Write(s.hello); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
	}
	// The strangers' hellos are rank 0's before rank 1's.
	time.Sleep(300 * time.Millisecond)
	wg.Add(1)
	go func() {
		defer wg.Done()
		runs[1] = runCheck(t, envJob(1, "127.0.0.1", port, plans), "custom")
	}()
	for i, s := range strangers {
		c := conns[i]
		c.SetReadDeadline(time.Now().Add(40 * time.Second))
		h := make([]byte, 24)
		if _, err := io.ReadFull(c, h); err != nil {
			t.Errorf("%s: no answer from rank 0: %v", s.name, err)
			continue
		}
		n := binary.BigEndian.Uint64(h[16:])
		if h[5] != 4 || n > 1<<16 { // kindFail
			t.Errorf("%s: rank 0 answered a frame of kind %d (%d bytes), want a fail frame (kind 4); kind 2 is the rank table", s.name, h[5], n)
			continue
		}
		p := make([]byte, n)
		io.ReadFull(c, p)
		t.Logf("%s: refused: %s", s.name, p)
		if !strings.Contains(string(p), s.want) {
			t.Errorf("%s: refused with %q, want %q", s.name, p, s.want)
		}
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	checkCustomRuns(t, runs)
}

// TestAuthListenerBinds: with a non-loopback MASTER_ADDR, rank 0 listens
// on that address only: its port on 127.0.0.1 refuses connections while
// rank 0 waits for rank 1. (Before, rank 0 listened on every interface.)
func TestAuthListenerBinds(t *testing.T) {
	host := bootstrapHost()
	if ip := net.ParseIP(host); ip == nil || ip.IsLoopback() {
		t.Skipf("no non-loopback IPv4 address here (%q)", host)
	}
	artifacts(t) // built before rank 0 starts: the strangers wait 30 s for it
	plans := bundledPlans(t, map[string]planDef{"allreduce.json": {"allreduce_packet", map[string]string{"world_size": "2"}}})
	port := freePort(t)
	runs := make([]run, 2)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		runs[0] = runCheck(t, envJob(0, host, port, plans), "custom")
	}()
	dialUntil(t, net.JoinHostPort(host, port)).Close()
	if c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", port), 5*time.Second); err == nil {
		c.Close()
		t.Errorf("rank 0, told MASTER_ADDR=%s, accepts connections at 127.0.0.1:%s", host, port)
	} else {
		t.Logf("127.0.0.1:%s: %v", port, err)
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		runs[1] = runCheck(t, envJob(1, host, port, plans), "custom")
	}()
	wg.Wait()
	if t.Failed() {
		return
	}
	checkCustomRuns(t, runs)
}
