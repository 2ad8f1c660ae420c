package tier_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/locus-go/locus/tier"
	"github.com/locus-go/locus/tier/host"
)

// The model: what a Manager must hold after any sequence of calls, kept by
// a reference that knows nothing of slots, free lists or eviction order.
// It takes the eviction policy's choices from the plans (they must be
// evictable blocks not among the call's keys) and predicts everything
// else: which keys a store takes, whether it is refused, whether a load is
// allowed, exactly which keys Remove removes and which it reports busy,
// what Lookup answers, and the four slot counts.

type mblock struct {
	key     tier.Key
	storing bool
	pins    int
	orphan  bool // left the index (Reset, a failed load), held by a job
	written bool // stored by Store, or by hand over a DirectStorage: a Load of it reads its bytes
}

type mjob struct {
	load   bool
	epoch  int
	blocks []*mblock
}

type model struct {
	capacity int
	byKey    map[tier.Key]*mblock
	orphans  map[*mblock]bool
	jobs     map[tier.Job]*mjob
	async    map[tier.Job]bool // Store and Load jobs, completed by Drain
	epoch    int               // Resets so far
	direct   bool              // the storage is a DirectStorage: a hand store commits its slots
}

func newModel(capacity int) *model {
	return &model{capacity: capacity, byKey: map[tier.Key]*mblock{}, orphans: map[*mblock]bool{}, jobs: map[tier.Job]*mjob{}, async: map[tier.Job]bool{}}
}

func (md *model) evictable(b *mblock) bool { return !b.storing && b.pins == 0 && !b.orphan }

// counts returns free, evictable, store-pending and load-pinned slots.
func (md *model) counts() (free, ev, st, pin int) {
	all := make([]*mblock, 0, len(md.byKey)+len(md.orphans))
	for _, b := range md.byKey {
		all = append(all, b)
	}
	for b := range md.orphans {
		all = append(all, b)
	}
	for _, b := range all {
		switch {
		case b.storing:
			st++
		case b.pins > 0:
			pin++
		default:
			ev++
		}
	}
	return md.capacity - len(all), ev, st, pin
}

func (md *model) result(k tier.Key) tier.Result {
	b, ok := md.byKey[k]
	switch {
	case !ok:
		return tier.Miss
	case b.storing:
		return tier.HitPending
	}
	return tier.Hit
}

// loadFails returns the index of the block a Load job fails at: the
// first that no Store wrote (over a storage that is not a DirectStorage, a
// hand-stored block's slot holds another block, or nothing), or -1.
func (md *model) loadFails(rec *mjob) int {
	for i, b := range rec.blocks {
		if !b.written {
			return i
		}
	}
	return -1
}

// finish applies the completion of job j (ok for a store; failed, the
// block a load failed at, or -1).
func (md *model) finish(j tier.Job, ok bool, failed int) {
	rec := md.jobs[j]
	delete(md.jobs, j)
	delete(md.async, j)
	if failed >= 0 && rec.epoch == md.epoch {
		if b := rec.blocks[failed]; !b.orphan {
			delete(md.byKey, b.key)
			b.orphan = true
			md.orphans[b] = true
		}
	}
	for _, b := range rec.blocks {
		if rec.load {
			b.pins--
			if b.pins == 0 && b.orphan {
				delete(md.orphans, b)
			}
			continue
		}
		b.storing = false
		if b.orphan || !ok {
			delete(md.orphans, b)
			if !b.orphan {
				delete(md.byKey, b.key)
			}
		}
	}
}

// modelHarness drives a Manager and the model with one op per step.
type modelHarness struct {
	t    *testing.T
	m    *tier.Manager
	md   *model
	nkey int
}

func (h *modelHarness) failf(format string, args ...any) {
	h.t.Helper()
	h.t.Fatalf(format, args...)
}

// pick returns 1 to 4 keys (maybe repeated) chosen by the input.
func (h *modelHarness) pick(in []byte) []tier.Key {
	n := 1
	if len(in) > 0 {
		n = 1 + int(in[0]%4)
		in = in[1:]
	}
	ks := make([]tier.Key, 0, n)
	for i := range n {
		v := i * 5
		if i < len(in) {
			v = int(in[i])
		}
		ks = append(ks, key(v%h.nkey))
	}
	return ks
}

func (h *modelHarness) step(op byte, in []byte) {
	h.t.Helper()
	m, md := h.m, h.md
	switch op % 10 {
	case 0, 1: // PrepareStore, by hand
		ks := h.pick(in)
		h.prepareStore(ks, false)
	case 2: // Store, copied on a worker
		ks := h.pick(in)
		h.prepareStore(ks, true)
	case 3: // PrepareLoad or Load
		ks := h.pick(in)
		ks = ks[:min(len(ks), 2)]
		loadable := true
		for _, k := range ks {
			loadable = loadable && md.result(k) == tier.Hit
		}
		var j tier.Job
		var err error
		async := len(in) > 2 && in[2]&1 == 1
		if async {
			dsts := make([][]byte, len(ks))
			for i := range dsts {
				dsts[i] = make([]byte, bs)
			}
			j, err = m.Load(ks, dsts)
		} else {
			var p tier.LoadPlan
			p, err = m.PrepareLoad(ks)
			j = p.Job
		}
		if loadable != (err == nil) {
			h.failf("load %v: loadable %v, got %v", ks, loadable, err)
		}
		if err != nil {
			if !errors.Is(err, tier.ErrNotLoadable) {
				h.failf("load: %v", err)
			}
			return
		}
		rec := &mjob{load: true, epoch: md.epoch}
		for _, k := range ks {
			b := md.byKey[k]
			b.pins++
			rec.blocks = append(rec.blocks, b)
		}
		md.jobs[j] = rec
		if async {
			md.async[j] = true
		}
	case 4, 9: // complete a job by hand (the lowest-numbered, for determinism)
		var hand []tier.Job
		for j := range md.jobs {
			if !md.async[j] {
				hand = append(hand, j)
			}
		}
		if len(hand) == 0 {
			return
		}
		slices.SortFunc(hand, func(a, b tier.Job) int { return cmpString(a.String(), b.String()) })
		j := hand[int(at(in, 0))%len(hand)]
		ok := at(in, 1)%4 != 0
		var err error
		if md.jobs[j].load {
			err = m.CompleteLoad(j)
		} else {
			err = m.CompleteStore(j, ok)
		}
		h.checkJobErr(j, err)
		md.finish(j, ok, -1)
	case 5: // Drain until every copy in flight is reported: the steps
		// between a Store or Load and this one run while it copies, and
		// the trajectory does not depend on how fast the workers are.
		var done []tier.Done
		for deadline := time.Now().Add(10 * time.Second); len(done) < len(md.async); {
			var err error
			if done, err = m.Drain(done); err != nil {
				h.failf("drain: %v", err)
			}
			if time.Now().After(deadline) {
				h.failf("%d copies never reported", len(md.async)-len(done))
			}
			if len(done) < len(md.async) {
				time.Sleep(20 * time.Microsecond)
			}
		}
		for _, d := range done {
			if !md.async[d.Job] {
				h.failf("drain reported %v, not an async job in flight", d.Job)
			}
			rec := md.jobs[d.Job]
			failed := -1
			if rec.load {
				failed = md.loadFails(rec)
			}
			stale := rec.epoch != md.epoch
			// A stale copy may fail or not (a Reset storage may refuse
			// its reads); either way it is reported stale and unused.
			if !stale && (d.OK != (failed < 0) || !d.OK && d.Failed != failed) {
				h.failf("copy %+v: model fails at block %d", d, failed)
			}
			if d.OK || stale {
				h.checkJobErr(d.Job, d.Err)
			}
			md.finish(d.Job, true, failed)
		}
	case 6, 7: // Remove
		ks := h.pick(in)
		var want, wantBusy []tier.Key
		seen := map[tier.Key]bool{}
		for _, k := range ks {
			b, ok := md.byKey[k]
			switch {
			case !ok || seen[k]:
			case md.evictable(b):
				want = append(want, k)
				seen[k] = true
			default:
				wantBusy = append(wantBusy, k)
			}
		}
		m.TakeEvents(nil)
		n, busy, err := m.Remove(ks, nil)
		if err != nil || n != len(want) || !slices.Equal(busy, wantBusy) {
			h.failf("Remove(%v) = %d, %v, %v; want %d, %v", ks, n, busy, err, len(want), wantBusy)
		}
		ev := m.TakeEvents(nil)
		switch {
		case len(want) == 0 && len(ev) != 0:
			h.failf("Remove of nothing recorded %+v", ev)
		case len(want) > 0 && (len(ev) != 1 || ev[0].Kind != tier.BlockRemoved || !slices.Equal(ev[0].Keys, want)):
			h.failf("Remove(%v) recorded %+v, want BlockRemoved %v", ks, ev, want)
		}
		for _, k := range want {
			delete(md.byKey, k)
		}
	case 8: // Touch and Lookup, rarely Reset
		ks := h.pick(in)
		m.Touch(ks)
		if at(in, 0) == 0xff {
			if err := m.Reset(); err != nil {
				h.failf("reset: %v", err)
			}
			md.epoch++
			for k, b := range md.byKey {
				if b.storing || b.pins > 0 {
					b.orphan = true
					md.orphans[b] = true
				}
				delete(md.byKey, k)
			}
		}
	}
	h.verify()
}

func (h *modelHarness) checkJobErr(j tier.Job, err error) {
	h.t.Helper()
	stale := h.md.jobs[j].epoch != h.md.epoch
	if stale != errors.Is(err, tier.ErrStaleJob) || !stale && err != nil {
		h.failf("completion of %v: stale %v, got %v", j, stale, err)
	}
}

func (h *modelHarness) prepareStore(ks []tier.Key, async bool) {
	h.t.Helper()
	m, md := h.m, h.md
	var fresh []tier.Key
	held := 0
	seen := map[tier.Key]bool{}
	for _, k := range ks {
		if seen[k] {
			continue
		}
		seen[k] = true
		if b, ok := md.byKey[k]; ok {
			if md.evictable(b) {
				held++
			}
			continue
		}
		fresh = append(fresh, k)
	}
	free, ev, _, _ := md.counts()
	fits := len(fresh)-free <= ev-held
	var p tier.StorePlan
	var err error
	if async {
		srcs := make([][]byte, len(ks))
		for i, k := range ks {
			srcs[i] = block(k)
		}
		p, err = m.Store(ks, srcs)
	} else {
		p, err = m.PrepareStore(ks)
	}
	if fits != (err == nil) || err != nil && !errors.Is(err, tier.ErrNoSpace) {
		h.failf("store %v (free %d, evictable %d, held %d): fits %v, got %v", ks, free, ev, held, fits, err)
	}
	if err != nil {
		return
	}
	if !slices.Equal(p.Keys, fresh) || p.Skipped != len(ks)-len(fresh) {
		h.failf("store %v: plan keys %v skipped %d, want %v", ks, p.Keys, p.Skipped, fresh)
	}
	if len(p.Evicted) != max(len(fresh)-free, 0) {
		h.failf("store %v: evicted %v with %d free", ks, p.Evicted, free)
	}
	for _, k := range p.Evicted {
		b, ok := md.byKey[k]
		if !ok || !md.evictable(b) || seen[k] {
			h.failf("store %v evicted %v, which is not evictable", ks, k)
		}
		delete(md.byKey, k)
	}
	if len(fresh) == 0 {
		return
	}
	rec := &mjob{epoch: md.epoch}
	for _, k := range fresh {
		b := &mblock{key: k, storing: true, written: async || md.direct}
		md.byKey[k] = b
		rec.blocks = append(rec.blocks, b)
	}
	md.jobs[p.Job] = rec
	if async {
		md.async[p.Job] = true
	}
}

func (h *modelHarness) verify() {
	h.t.Helper()
	if err := h.m.Check(); err != nil {
		h.failf("check: %v", err)
	}
	free, ev, st, pin := h.md.counts()
	s := h.m.Stats()
	if s.Free != free || s.Evictable != ev || s.StorePending != st || s.LoadPinned != pin || s.JobsInFlight != len(h.md.jobs) {
		h.failf("stats %d/%d/%d/%d, %d jobs; model %d/%d/%d/%d, %d jobs", s.Free, s.Evictable, s.StorePending, s.LoadPinned, s.JobsInFlight, free, ev, st, pin, len(h.md.jobs))
	}
	ks := keys(0, h.nkey)
	got := h.m.Peek(ks, nil)
	for i, k := range ks {
		if got[i] != h.md.result(k) {
			h.failf("peek %v: %v, model %v", k, got[i], h.md.result(k))
		}
	}
}

func at(in []byte, i int) byte {
	if i < len(in) {
		return in[i]
	}
	return 0
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// runModel runs the ops in data (one op byte and four argument bytes per
// step) against a fresh Manager and the model, then drains every copy.
// With direct the storage is a host tier, a DirectStorage; without, the
// same tier behind a Storage that is not one, so that a store by hand
// (PrepareStore, CompleteStore with nothing written) leaves a slot a Load
// of it fails at.
func runModel(t *testing.T, data []byte, ev func(int) tier.Eviction, direct bool) tier.Stats {
	st, err := host.New(bs, 8, host.WithHeap())
	if err != nil {
		t.Fatal(err)
	}
	var storage tier.Storage = st
	if !direct {
		storage = struct{ tier.Storage }{st}
	}
	m, err := tier.New(storage, tier.WithEviction(ev), tier.WithWorkers(2))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	md := newModel(8)
	md.direct = direct
	h := &modelHarness{t: t, m: m, md: md, nkey: 14}
	for len(data) > 0 {
		n := min(len(data), 5)
		h.step(data[0], data[1:n])
		data = data[n:]
	}
	h.step(5, nil)
	return m.Stats()
}

// modelSeeds are op streams that reach every op and the interesting
// states: a full tier, removals of busy blocks, a Reset with jobs in
// flight.
func modelSeeds() [][]byte {
	var seeds [][]byte
	for s := range 24 {
		var b []byte
		x := uint32(s)*2654435761 + 1
		for range 240 {
			x ^= x << 13
			x ^= x >> 17
			x ^= x << 5
			op := byte(x)
			if op == 0xff || byte(x>>8) == 0xff {
				op = 8
			}
			b = append(b, op, byte(x>>8), byte(x>>16), byte(x>>24), byte(x>>4))
		}
		if s%3 == 0 {
			b = append(b, 8, 0xff, 0, 0, 0) // a Reset with whatever is in flight
			b = append(b, 3, 1, 2, 3, 1, 6, 3, 0, 1, 2, 5, 0, 0, 0, 0)
		}
		seeds = append(seeds, b)
	}
	return seeds
}

// TestModel runs the seeds against the model under both policies.
func TestModel(t *testing.T) {
	for _, ev := range evictions {
		var sum tier.Stats
		for i, seed := range modelSeeds() {
			t.Run(fmt.Sprintf("%s/%d/direct", ev.name, i), func(t *testing.T) { runModel(t, seed, ev.f, true) })
			t.Run(fmt.Sprintf("%s/%d", ev.name, i), func(t *testing.T) {
				s := runModel(t, seed, ev.f, false)
				sum.Removed += s.Removed
				sum.RemoveBusy += s.RemoveBusy
				sum.Evictions += s.Evictions
				sum.Refused += s.Refused
				sum.LoadFailures += s.LoadFailures
				sum.StaleCompletions += s.StaleCompletions
				sum.Loads += s.Loads
			})
		}
		// The seeds must reach the states the model is for.
		if sum.Removed == 0 || sum.RemoveBusy == 0 || sum.Evictions == 0 || sum.Refused == 0 ||
			sum.LoadFailures == 0 || sum.StaleCompletions == 0 || sum.Loads == 0 {
			t.Errorf("%s: the seeds miss a state: %+v", ev.name, sum)
		}
		t.Logf("%s: removed %d, busy %d, evictions %d, refused %d, loads %d, load failures %d, stale %d",
			ev.name, sum.Removed, sum.RemoveBusy, sum.Evictions, sum.Refused, sum.Loads, sum.LoadFailures, sum.StaleCompletions)
	}
}

// FuzzModel: go test -run X -fuzz FuzzModel ./tier
func FuzzModel(f *testing.F) {
	for _, s := range modelSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 4000 {
			data = data[:4000]
		}
		ev := tier.NewLRU
		if len(data) > 0 && data[len(data)-1]&1 == 1 {
			ev = tier.NewS3FIFO
		}
		_ = runModel(t, data, ev, len(data) > 0 && data[0]&1 == 1)
	})
}
