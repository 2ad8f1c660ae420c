package main

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/locus-go/locus"
	"github.com/locus-go/locus/bench"
	"github.com/locus-go/locus/fleet"
	"github.com/locus-go/locus/kv"
	"github.com/locus-go/locus/metrics"
	"github.com/locus-go/locus/pool"
	"github.com/locus-go/locus/tier"
	"github.com/locus-go/locus/tier/host"
	"github.com/locus-go/locus/tier/redis"
)

// One engine of the fleet, wherever it runs: fleetEngine is the engine
// itself (its kv.Manager, tiers, metrics server and schedule), which the
// in-process mode keeps on the replay goroutine (fleetLocal) and the
// process mode runs in a child (fleet_proc.go). Both modes drive it
// through fleetMember, one step at a time, in engine order.

// fleetSpec is what one engine is built from. A child process reads it as
// the first JSON value on its stdin.
type fleetSpec struct {
	Name      string      `json:"name"`
	Model     string      `json:"model"`
	Config    fleetConfig `json:"config"`
	Remote    bool        `json:"remote"`
	Namespace string      `json:"namespace"` // the remote tier's, shared by the fleet
	Requests  int         `json:"requests"`  // in the plan: the child checks its own
	// DieAt and StallAt make a child exit with an error, or stop
	// answering, when asked to run that step (nil: never): for tests of
	// the parent's handling.
	DieAt   *int `json:"die_at,omitempty"`
	StallAt *int `json:"stall_at,omitempty"`
}

// fleetTotals is an engine's accounting at the end of a run.
type fleetTotals struct {
	// Query, Hot, Host and Remote are the prompt tokens and the prefix
	// hits per tier of first admissions: readmissions after preemption
	// are left out.
	Query, Hot, Host, Remote uint64
	// HitTokens is the manager's own count of hot hits, readmissions
	// included: what its metrics report.
	HitTokens                                     uint64
	NotRecomputed, Deferred, Preemptions, Learned uint64
	StoredBlocks, LoadedBlocks                    []uint64 // per tier
}

// fleetMember is one engine as the replay drives it.
type fleetMember interface {
	// step runs step n (0 is the first): it indexes in the engine's view
	// of the remote tier the blocks other engines stored there (learn),
	// admits the plan's requests admit, runs one engine step, and returns
	// once the router's index has applied every event the step emitted:
	// the requests that finished, and the blocks the engine stored in the
	// remote tier. Its errors name the engine and the step.
	step(n int, admit []int, learn []tier.Key) (finished int, stored []tier.Key, err error)
	// totals returns the engine's accounting, publishing the snapshots
	// its metrics read.
	totals() (fleetTotals, error)
	// metricsURL is where the engine serves its metrics.
	metricsURL() string
	close() error
}

type fleetReq struct {
	r     *bench.ChatRequest
	id    kv.SeqID
	done  int
	again bool // readmitted after a preemption
}

// readmits is what readmissions after preemptions added to an engine's
// prefix-cache counts; the run's figures leave it out, so that a router
// whose engine preempts more does not look better for hitting its own
// preempted requests' blocks.
type readmits struct {
	query, hot, host, remote uint64
}

// hitCounts returns the counts readmits tracks, from st.
func hitCounts(st kv.Stats) readmits {
	r := readmits{query: st.QueryTokens, hot: st.HitTokens}
	if len(st.Tiers) > 0 {
		r.host = st.Tiers[0].HitTokens
	}
	if len(st.Tiers) > 1 {
		r.remote = st.Tiers[1].HitTokens
	}
	return r
}

// fleetEngine is one engine: a kv.Manager over its own hot pool, host
// tier and optional view of the shared remote tier, with a Prometheus
// registry served on a loopback HTTP port. Its events go to sink, and the
// blocks it stores in the remote tier are kept for the others to learn.
type fleetEngine struct {
	name   string
	pool   *locus.DefaultPool
	m      *kv.Manager
	host   *tier.Manager
	remote *tier.Manager // nil without the remote tier
	srv    *http.Server
	url    string

	stored  []tier.Key // blocks stored in the remote tier since takeStored
	learned uint64

	pending, live []*fleetReq
	notRecomputed uint64
	deferred      uint64
	requeued      []*fleetReq // preempted this step
	readmit       readmits
}

// newFleetEngine builds spec's engine; every event of its manager goes to
// sink (nil for none), and extra collectors join its metrics.
func newFleetEngine(spec fleetSpec, sink func(*kv.Event), extra ...prometheus.Collector) (e *fleetEngine, err error) {
	cfg := spec.Config
	e = &fleetEngine{name: spec.Name}
	defer func() {
		if err != nil {
			err = errors.Join(err, e.close())
			e = nil
		}
	}()
	if e.pool, err = locus.Default(locus.WithBlockSize(fleetBlockBytes), locus.WithBlocks(cfg.HotBlocks)); err != nil {
		return e, err
	}
	st, err := host.New(fleetBlockBytes, cfg.HostBlocks, host.WithHeap())
	if err != nil {
		return e, err
	}
	if e.host, err = tier.New(st); err != nil {
		_ = st.Close()
		return e, err
	}
	tiers := []kv.Tier{e.host}
	if spec.Remote {
		var opts []redis.Option
		if cfg.Cluster {
			opts = append(opts, redis.WithCluster())
		}
		opts = append(opts, redis.WithTTL(10*time.Minute), redis.WithTimeout(2*time.Second))
		rt, err := redis.Dial(cfg.Redis, spec.Namespace, fleetBlockBytes, cfg.RemoteBlocks, opts...)
		if err != nil {
			return e, err
		}
		if err := rt.Ping(); err != nil {
			_ = rt.Close()
			return e, fmt.Errorf("redis %s: %w", strings.Join(cfg.Redis, ","), err)
		}
		if e.remote, err = tier.New(rt); err != nil {
			_ = rt.Close()
			return e, err
		}
		tiers = append(tiers, e.remote)
	}
	var key [tier.KeyHashSize]byte
	sub := func(ev *kv.Event) {
		if sink != nil {
			sink(ev)
		}
		if ev.Kind == kv.BlockStored && strings.EqualFold(ev.Medium, string(redis.Medium)) {
			for _, h := range ev.Hashes {
				e.stored = append(e.stored, tier.KeyOf(h.AppendBytes(key[:0]), 0))
			}
		}
	}
	if e.m, err = kv.New(e.pool, kv.WithTokensPerBlock(cfg.Chat.BlockSize), kv.WithHash(cfg.Chat.Hash, ""),
		kv.WithTiers(tiers...), kv.WithSubscriber(sub)); err != nil {
		return e, err
	}
	reg := prometheus.NewRegistry()
	cs := append([]prometheus.Collector{metrics.NewManager("kv", e.m), metrics.NewTier("host", e.host)}, extra...)
	if e.remote != nil {
		cs = append(cs, metrics.NewTier("remote", e.remote))
	}
	if err := registerAll(reg, cs); err != nil {
		return e, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return e, err
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	e.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	e.url = "http://" + ln.Addr().String() + "/metrics"
	go func() { _ = e.srv.Serve(ln) }()
	return e, nil
}

// registerAll registers every collector, returning the first error.
func registerAll(reg *prometheus.Registry, cs []prometheus.Collector) error {
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// step runs one engine step: index the remote blocks others stored
// (learn), admit the new requests and the preempted ones (waiting for tier
// loads), decode one token of every live request, release the finished
// ones, and let the tiers' copies complete. It returns the requests that
// finished.
func (e *fleetEngine) step(admit []*bench.ChatRequest, learn []tier.Key) (finished int, err error) {
	if err := e.applyLearned(learn); err != nil {
		return 0, err
	}
	for _, r := range admit {
		e.pending = append(e.pending, &fleetReq{r: r})
	}
	var admitted []*fleetReq
	kept := e.pending[:0]
	for _, q := range e.pending {
		var before readmits
		if q.again {
			before = hitCounts(e.m.Stats())
		}
		id, _, err := e.m.Admit(q.r.Prompt, kv.Key{})
		if q.again && err == nil {
			after := hitCounts(e.m.Stats())
			e.readmit.query += after.query - before.query
			e.readmit.hot += after.hot - before.hot
			e.readmit.host += after.host - before.host
			e.readmit.remote += after.remote - before.remote
		}
		if errors.Is(err, pool.ErrExhausted) {
			e.deferred++
			kept = append(kept, q)
			continue
		}
		if err != nil {
			return 0, err
		}
		q.id = id
		admitted = append(admitted, q)
	}
	e.pending = kept
	for _, q := range admitted {
		cached, err := e.ready(q.id)
		if err != nil {
			return 0, err
		}
		if !q.again {
			e.notRecomputed += uint64(cached)
		}
	}
	live := e.live[:0]
	for _, q := range e.live {
		err := e.m.Append(q.id, q.r.Reply[q.done:q.done+1])
		switch {
		case errors.Is(err, pool.ErrExhausted):
			// The pool is full of running requests: preempt this one, as
			// vLLM preempts by recompute (its full blocks stay cached),
			// and admit it again when blocks are free. Waiting instead
			// deadlocks once every running request needs one more block.
			if _, err := e.m.Preempt(q.id); err != nil {
				return 0, err
			}
			e.requeued = append(e.requeued, &fleetReq{r: q.r, again: true})
			continue
		case err != nil:
			return 0, err
		}
		if q.done++; q.done < len(q.r.Reply) {
			live = append(live, q)
			continue
		}
		if err := e.m.Release(q.id); err != nil {
			return 0, err
		}
		finished++
	}
	e.live = append(live, admitted...)
	// Preempted requests go first when blocks are free again.
	e.pending = append(e.requeued, e.pending...)
	e.requeued = nil
	return finished, e.settle()
}

// takeStored returns the blocks the engine stored in the remote tier since
// the last call, and forgets them.
func (e *fleetEngine) takeStored() []tier.Key {
	s := e.stored
	e.stored = nil
	return s
}

// ready drains until the sequence's tier loads completed and returns the
// tokens it need not compute.
func (e *fleetEngine) ready(id kv.SeqID) (int, error) {
	for deadline := time.Now().Add(30 * time.Second); ; {
		cached, ok, err := e.m.Ready(id)
		if err != nil || ok {
			return cached, err
		}
		if _, err := e.m.Drain(); err != nil {
			return 0, err
		}
		if time.Now().After(deadline) {
			return 0, errors.New("tier loads did not complete in 30 s")
		}
		time.Sleep(50 * time.Microsecond)
	}
}

// settle drains until no copy is in flight, so that every run of the
// schedule does the same copies whatever the timing.
func (e *fleetEngine) settle() error {
	for deadline := time.Now().Add(30 * time.Second); ; {
		if _, err := e.m.Drain(); err != nil {
			return err
		}
		if e.m.Stats().InFlight == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return errors.New("tier copies did not complete in 30 s")
		}
		time.Sleep(50 * time.Microsecond)
	}
}

// applyLearned indexes in this engine's view of the remote tier the blocks
// other engines stored there, without copying them (they are in Redis).
func (e *fleetEngine) applyLearned(keys []tier.Key) error {
	if e.remote == nil || len(keys) == 0 {
		return nil
	}
	plan, err := e.remote.PrepareStore(keys)
	if errors.Is(err, tier.ErrNoSpace) || errors.Is(err, tier.ErrBusy) {
		return nil // a view that cannot take them misses them
	}
	if err != nil {
		return err
	}
	e.learned += uint64(len(plan.Slots))
	return e.remote.CompleteStore(plan.Job, true)
}

// totals returns the engine's accounting; reading the manager's and the
// tiers' stats publishes the snapshots their metrics read.
func (e *fleetEngine) totals() fleetTotals {
	st := e.m.Stats()
	e.host.Stats()
	if e.remote != nil {
		e.remote.Stats()
	}
	c := hitCounts(st)
	t := fleetTotals{
		Query: c.query - e.readmit.query, Hot: c.hot - e.readmit.hot,
		Host: c.host - e.readmit.host, Remote: c.remote - e.readmit.remote,
		HitTokens: st.HitTokens, NotRecomputed: e.notRecomputed, Deferred: e.deferred,
		Preemptions: st.Preemptions, Learned: e.learned,
	}
	for _, ts := range st.Tiers {
		t.StoredBlocks = append(t.StoredBlocks, ts.StoredBlocks)
		t.LoadedBlocks = append(t.LoadedBlocks, ts.LoadedBlocks)
	}
	return t
}

func (e *fleetEngine) close() error {
	var errs []error
	if e.srv != nil {
		errs = append(errs, e.srv.Close())
	}
	if e.m != nil {
		errs = append(errs, e.m.Close())
	}
	for _, t := range []*tier.Manager{e.host, e.remote} {
		if t != nil {
			errs = append(errs, t.Close())
		}
	}
	if e.pool != nil {
		errs = append(errs, e.pool.Close())
	}
	return errors.Join(errs...)
}

// fleetLocal is an engine in the replay's own process: its events are
// copied as the manager emits them and applied to the router's index when
// its step ends.
type fleetLocal struct {
	e    *fleetEngine
	x    *fleet.Index
	plan *bench.ChatPlan
	buf  []kv.Event // the step's events, copied
	reqs []*bench.ChatRequest
}

func newFleetLocal(spec fleetSpec, plan *bench.ChatPlan, x *fleet.Index) (*fleetLocal, error) {
	l := &fleetLocal{x: x, plan: plan}
	e, err := newFleetEngine(spec, func(ev *kv.Event) {
		c := *ev
		c.Hashes, c.Tokens = slices.Clone(ev.Hashes), slices.Clone(ev.Tokens)
		l.buf = append(l.buf, c)
	})
	if err != nil {
		return nil, err
	}
	l.e = e
	return l, nil
}

func (l *fleetLocal) step(step int, admit []int, learn []tier.Key) (int, []tier.Key, error) {
	l.reqs = l.reqs[:0]
	for _, i := range admit {
		l.reqs = append(l.reqs, &l.plan.Requests[i])
	}
	n, err := l.e.step(l.reqs, learn)
	for i := range l.buf {
		if err == nil {
			err = l.x.Apply(l.e.name, &l.buf[i])
		}
		l.buf[i] = kv.Event{}
	}
	l.buf = l.buf[:0]
	if err != nil {
		return 0, nil, fmt.Errorf("%s step %d: %w", l.e.name, step, err)
	}
	return n, l.e.takeStored(), nil
}

func (l *fleetLocal) totals() (fleetTotals, error) { return l.e.totals(), nil }
func (l *fleetLocal) metricsURL() string           { return l.e.url }
func (l *fleetLocal) close() error                 { return l.e.close() }
