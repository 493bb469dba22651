package rankwire

// watch.go finds deadlocks that span the processes of a multi-process
// session. No process can tell alone: a rank whose thread blocks all
// wait may be waiting for a peer that is still busy. So every rank
// reports to rank 0 when it has made no progress for the deadlock
// timeout (suspect, inside a launch; idle, between launches) and when it
// moves again (resumed). When no rank is running and at least one is
// suspect, rank 0 probes every rank; if every answer shows the same
// progress as its report, the job is deadlocked, and rank 0 sends every
// suspect rank the list of every rank's blocked thread blocks, which it
// raises as its launch's *executor.DeadlockError. Messages go to rank 0
// on World.Tag+TagWatch and come back on +TagWatchReply, as JSON. The
// protocol knows a session only through WatchTarget: every backend's
// rank sessions use it.

import (
	"cmp"
	"context"
	"encoding/json"
	"slices"
	"sync"
	"time"

	"github.com/mscclgo/mscclgo/executor"
)

// WatchTarget is a rank session as the cross-process deadlock watch sees
// it.
type WatchTarget interface {
	// WatchState returns the number of launches started, whether one is
	// running (and not yet failed), and a counter that changes whenever
	// the running launch makes progress.
	WatchState() (launches uint64, active bool, progress uint64)
	// WatchBlocked lists the rank's unfinished thread blocks of the
	// running launch.
	WatchBlocked() []executor.BlockedTB
	// WatchDeadlock stops launch number launch, if it is still running,
	// with the job-wide report.
	WatchDeadlock(launch uint64, blocked []executor.BlockedTB)
}

// WatchConfig is where a rank's side of the deadlock watch runs.
type WatchConfig struct {
	// Net is the job's bootstrap; Ctx ends the watch.
	Net Net
	Ctx context.Context
	// Tag is the first of the two message tags: reports to rank 0 on
	// Tag, probes and verdicts back on Tag+1.
	Tag uint32
	// Timeout is how long a rank makes no progress before it reports.
	Timeout time.Duration
}

// Watch starts this rank's side of the cross-process deadlock watch
// (and on rank 0 the coordinator); its goroutines are counted in wg and
// end with cfg.Ctx. Every rank of the job must run it with the same tag.
func Watch(cfg WatchConfig, t WatchTarget, wg *sync.WaitGroup) {
	w := &watch{cfg: cfg, t: t, rank: cfg.Net.Rank()}
	wg.Add(1)
	go w.run(wg)
}

// The watch's two tags, relative to WatchConfig.Tag.
const (
	watchReport = 0
	watchReply  = 1
)

// watchMsg is one message of the deadlock watch.
type watchMsg struct {
	// Kind: suspect, idle, resumed (rank to rank 0); probe, deadlock
	// (rank 0 to a rank); reply (to a probe).
	Kind     string               `json:"kind"`
	Round    uint64               `json:"round,omitempty"`
	Active   bool                 `json:"active,omitempty"`
	Launch   uint64               `json:"launch"`
	Progress uint64               `json:"progress"`
	Blocked  []executor.BlockedTB `json:"blocked,omitempty"`
}

// watch is a rank's side of the deadlock watch.
type watch struct {
	cfg  WatchConfig
	t    WatchTarget
	rank int
}

// snap is a rank's progress: the launches it started and the current
// launch's progress counter.
type snap struct {
	active           bool
	launch, progress uint64
}

func (w *watch) snapshot() snap {
	launch, active, progress := w.t.WatchState()
	if !active {
		progress = 0
	}
	return snap{active: active, launch: launch, progress: progress}
}

func (w *watch) send(msg watchMsg, to int, tag uint32) {
	data, err := json.Marshal(msg)
	if err == nil {
		// A failed send means the job is going down; the launches learn
		// it from their context.
		_ = w.cfg.Net.Send(w.cfg.Ctx, to, w.cfg.Tag+tag, data)
	}
}

// run starts the rank's goroutines: the progress reporter, the handler
// of rank 0's probes and verdicts, and on rank 0 the coordinator.
func (w *watch) run(wg *sync.WaitGroup) {
	defer wg.Done()
	if w.rank == 0 {
		wg.Add(1)
		go w.coordinate(wg)
	}
	wg.Add(1)
	go w.answer(wg)
	timeout := w.cfg.Timeout
	tick := max(timeout/8, time.Millisecond)
	tk := time.NewTicker(tick)
	defer tk.Stop()
	last, since, reported := w.snapshot(), time.Now(), false
	for {
		select {
		case <-w.cfg.Ctx.Done():
			return
		case now := <-tk.C:
			cur := w.snapshot()
			if cur != last {
				last, since = cur, now
				if reported {
					reported = false
					w.send(watchMsg{Kind: "resumed", Launch: cur.launch, Progress: cur.progress}, 0, watchReport)
				}
				continue
			}
			if !reported && now.Sub(since) >= timeout {
				reported = true
				kind := "idle"
				if cur.active {
					kind = "suspect"
				}
				w.send(watchMsg{Kind: kind, Active: cur.active, Launch: cur.launch, Progress: cur.progress}, 0, watchReport)
			}
		}
	}
}

// answer handles rank 0's probes and deadlock verdicts.
func (w *watch) answer(wg *sync.WaitGroup) {
	defer wg.Done()
	for {
		data, err := w.cfg.Net.Recv(w.cfg.Ctx, 0, w.cfg.Tag+watchReply)
		if err != nil {
			return
		}
		var msg watchMsg
		if json.Unmarshal(data, &msg) != nil {
			continue
		}
		switch msg.Kind {
		case "probe":
			cur := w.snapshot()
			r := watchMsg{Kind: "reply", Round: msg.Round, Active: cur.active, Launch: cur.launch, Progress: cur.progress}
			if cur.active {
				r.Blocked = w.t.WatchBlocked()
			}
			w.send(r, 0, watchReport)
		case "deadlock":
			w.t.WatchDeadlock(msg.Launch, msg.Blocked)
		}
	}
}

// rankWatch is rank 0's record of one rank.
type rankWatch struct {
	kind  string // running, suspect, idle
	at    snap
	reply *watchMsg
}

type watchEvent struct {
	from int
	msg  watchMsg
}

// coordinate is rank 0's side: it collects every rank's reports, probes,
// and declares deadlocks.
func (w *watch) coordinate(wg *sync.WaitGroup) {
	defer wg.Done()
	n := w.cfg.Net.Size()
	events := make(chan watchEvent)
	for r := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				data, err := w.cfg.Net.Recv(w.cfg.Ctx, r, w.cfg.Tag+watchReport)
				if err != nil {
					return
				}
				var msg watchMsg
				if json.Unmarshal(data, &msg) != nil {
					continue
				}
				select {
				case events <- watchEvent{r, msg}:
				case <-w.cfg.Ctx.Done():
					return
				}
			}
		}()
	}
	ranks := make([]rankWatch, n)
	for r := range ranks {
		ranks[r].kind = "running"
	}
	var round uint64
	probing := false
	for {
		var ev watchEvent
		select {
		case <-w.cfg.Ctx.Done():
			return
		case ev = <-events:
		}
		rw := &ranks[ev.from]
		switch ev.msg.Kind {
		case "suspect", "idle":
			rw.kind = ev.msg.Kind
			rw.at = snap{active: ev.msg.Active, launch: ev.msg.Launch, progress: ev.msg.Progress}
		case "resumed":
			rw.kind = "running"
			probing = false // a probe in flight cannot conclude
		case "reply":
			if !probing || ev.msg.Round != round {
				continue
			}
			m := ev.msg
			rw.reply = &m
			if verdict := w.decide(ranks); verdict != nil {
				probing = false
				for r := range ranks {
					ranks[r].kind, ranks[r].reply = "running", nil
				}
				for r, m := range verdict {
					w.send(m, r, watchReply)
				}
			}
			continue
		}
		if probing || !w.allStopped(ranks) {
			continue
		}
		round++
		probing = true
		for r := range ranks {
			ranks[r].reply = nil
			w.send(watchMsg{Kind: "probe", Round: round}, r, watchReply)
		}
	}
}

// allStopped: no rank is running and at least one is suspect.
func (w *watch) allStopped(ranks []rankWatch) bool {
	suspect := false
	for _, r := range ranks {
		switch r.kind {
		case "running":
			return false
		case "suspect":
			suspect = true
		}
	}
	return suspect
}

// decide returns the deadlock messages per rank once every rank answered
// the probe with the progress it reported, or nil.
func (w *watch) decide(ranks []rankWatch) map[int]watchMsg {
	var blocked []executor.BlockedTB
	for _, r := range ranks {
		if r.reply == nil {
			return nil
		}
	}
	for _, r := range ranks {
		got := snap{active: r.reply.Active, launch: r.reply.Launch, progress: r.reply.Progress}
		if r.kind == "running" || got != r.at {
			return nil
		}
		blocked = append(blocked, r.reply.Blocked...)
	}
	slices.SortStableFunc(blocked, func(a, b executor.BlockedTB) int {
		return cmp.Or(cmp.Compare(a.Rank, b.Rank), cmp.Compare(a.TB, b.TB))
	})
	out := map[int]watchMsg{}
	for r, rw := range ranks {
		if rw.reply.Active {
			out[r] = watchMsg{Kind: "deadlock", Launch: rw.reply.Launch, Blocked: blocked}
		}
	}
	return out
}
