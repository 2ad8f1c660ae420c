package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/locus-go/locus"
	"github.com/locus-go/locus/bench"
	"github.com/locus-go/locus/cmd/locus-eval/internal/eval"
	"github.com/locus-go/locus/fleet"
	"github.com/locus-go/locus/kv"
	"github.com/locus-go/locus/metrics"
	"github.com/locus-go/locus/pool"
	"github.com/locus-go/locus/tier"
	"github.com/locus-go/locus/tier/host"
	"github.com/locus-go/locus/tier/redis"
)

// The fleet subcommand: N engines, each a kv.Manager over a hot pool too
// small for every conversation, with a host tier and optionally a remote
// tier on Redis shared by all, behind a router (fleet.Router, KV-aware or
// round-robin) that replays the chat workload. The engines run in this
// process, each with its own Prometheus registry served on a loopback HTTP
// port that the run scrapes while it replays; their events reach the
// router's fleet.Index in process, through each manager's subscriber and
// one goroutine per engine.

// fleetBlockBytes is the size of a KV block in the pools and tiers.
const fleetBlockBytes = 4096

// fleetWeights are the router's medium weights: llm-d's defaults, and the
// shared remote tier (which llm-d would weigh 1.0, as the GPU, unless
// configured) below the host tier, since every engine can load it.
func fleetWeights() fleet.Weights {
	w := fleet.DefaultWeights()
	w[strings.ToLower(string(redis.Medium))] = 0.5
	return w
}

// fleetConfig is what the flags set.
type fleetConfig struct {
	Engines      int
	Chat         bench.ChatConfig
	HotBlocks    int // per engine
	HostBlocks   int // per engine
	RemoteBlocks int // per engine's view of the remote tier
	Redis        []string
	Cluster      bool
	Scrape       time.Duration
}

func runFleet(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("locus-eval fleet", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, `Usage: locus-eval fleet [flags]

Replays the chat workload on a fleet of engines (an extension beyond LOCUS-EVAL v1): each engine is a
kv.Manager over a hot pool too small for every conversation, with a host tier and, with -redis, a remote
tier on Redis shared by all engines; a router sends each request to an engine, round-robin or KV-aware
(fleet.Router: llm-d's longest-prefix score over the engines' KV events). It prints, for each router with
and without the remote tier, the fleet's prefix-hit tokens per tier, the tokens not recomputed, the bytes
each tier stored and loaded, and the router's decisions per engine. The engines run in this process; each
serves its metrics on a loopback HTTP port, scraped during the run.

Flags:
`)
		fs.PrintDefaults()
	}
	cfg := fleetConfig{Engines: 3, Chat: bench.DefaultChat(), HotBlocks: 768, HostBlocks: 1024, RemoteBlocks: 8192, Scrape: 100 * time.Millisecond}
	quick := fs.Bool("quick", false, "a small trace (for tests): 12 conversations of 3 turns, 40 hot and 96 host blocks per engine")
	fs.IntVar(&cfg.Engines, "engines", cfg.Engines, "engines in the fleet (1 to 16)")
	conv := fs.Int("conversations", 0, "conversations in the trace (0: the default's, or -quick's)")
	turns := fs.Int("turns", 0, "turns per conversation (0: the default's, or -quick's)")
	hot := fs.Int("hot-blocks", 0, "hot pool blocks per engine (0: the default's, or -quick's)")
	hostBlocks := fs.Int("host-blocks", 0, "host tier blocks per engine (0: the default's, or -quick's)")
	fs.IntVar(&cfg.RemoteBlocks, "remote-blocks", cfg.RemoteBlocks, "remote tier blocks each engine tracks")
	fs.Uint64Var(&cfg.Chat.Seed, "seed", cfg.Chat.Seed, "seed of the schedule")
	redisAddrs := fs.String("redis", "", "ADDR[,ADDR...]: the remote tier's Redis server, or the seed nodes of a Redis Cluster (several addresses, or -redis-cluster); without it the remote-tier rows are skipped")
	fs.BoolVar(&cfg.Cluster, "redis-cluster", false, "the -redis address is a Redis Cluster node")
	fs.DurationVar(&cfg.Scrape, "scrape", cfg.Scrape, "interval between scrapes of each engine's metrics")
	asJSON := fs.Bool("json", false, "print a JSON document instead of the table")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if cfg.Chat.Hash == 0 {
		cfg.Chat.Hash = kv.SHA256CBOR // kv's default, vLLM's
	}
	if *quick {
		c := &cfg.Chat
		c.Conversations, c.Turns, c.SystemPrompts, c.SystemTokens = 12, 3, 3, 128
		c.UserTokens, c.ReplyTokens, c.ThinkSteps, c.Stagger = 32, 16, 8, 2
		cfg.HotBlocks, cfg.HostBlocks, cfg.RemoteBlocks, cfg.Scrape = 40, 96, 1024, 10*time.Millisecond
	}
	for _, o := range []struct {
		v   int
		dst *int
	}{{*conv, &cfg.Chat.Conversations}, {*turns, &cfg.Chat.Turns}, {*hot, &cfg.HotBlocks}, {*hostBlocks, &cfg.HostBlocks}} {
		if o.v != 0 {
			*o.dst = o.v
		}
	}
	if *redisAddrs != "" {
		cfg.Redis = strings.Split(*redisAddrs, ",")
		cfg.Cluster = cfg.Cluster || len(cfg.Redis) > 1
	}
	if err := checkFleet(cfg); err != nil {
		return err
	}
	doc, err := fleetReplay(cfg)
	if err != nil {
		return err
	}
	if *asJSON {
		return writeJSON(stdout, doc)
	}
	return eval.WriteFleetText(stdout, doc)
}

func checkFleet(cfg fleetConfig) error {
	switch {
	case cfg.Engines < 1 || cfg.Engines > 16:
		return fmt.Errorf("%w: -engines %d; want 1 to 16", eval.ErrConfig, cfg.Engines)
	case cfg.HotBlocks < 1 || cfg.HotBlocks > maxChatBlocks:
		return fmt.Errorf("%w: -hot-blocks %d; want 1 to %d", eval.ErrConfig, cfg.HotBlocks, maxChatBlocks)
	case cfg.HostBlocks < 1 || cfg.HostBlocks > maxChatBlocks:
		return fmt.Errorf("%w: -host-blocks %d; want 1 to %d", eval.ErrConfig, cfg.HostBlocks, maxChatBlocks)
	case cfg.RemoteBlocks < 1 || cfg.RemoteBlocks > 1<<22:
		return fmt.Errorf("%w: -remote-blocks %d; want 1 to %d", eval.ErrConfig, cfg.RemoteBlocks, 1<<22)
	case cfg.Scrape <= 0:
		return fmt.Errorf("%w: -scrape %v; want a positive interval", eval.ErrConfig, cfg.Scrape)
	}
	return checkChat(cfg.Chat, 1)
}

// fleetReplay runs the four configurations (two without -redis).
func fleetReplay(cfg fleetConfig) (*eval.Fleet, error) {
	plan, err := bench.NewChatPlan(cfg.Chat)
	if err != nil {
		return nil, err
	}
	now, machine, rev := time.Now().UTC(), eval.ThisMachine(), eval.ThisRevision()
	doc := &eval.Fleet{Schema: eval.FleetSchema, SchemaVersion: 1, Created: &now, Machine: &machine, Revision: &rev}
	c := &doc.Config
	c.Engines, c.Conversations, c.Turns, c.SystemPrompts = cfg.Engines, cfg.Chat.Conversations, cfg.Chat.Turns, cfg.Chat.SystemPrompts
	c.SystemTokens, c.UserTokens, c.ReplyTokens, c.BlockSize = cfg.Chat.SystemTokens, cfg.Chat.UserTokens, cfg.Chat.ReplyTokens, cfg.Chat.BlockSize
	c.BlockBytes, c.HotBlocks, c.HostBlocks, c.RemoteBlocks = fleetBlockBytes, cfg.HotBlocks, cfg.HostBlocks, cfg.RemoteBlocks
	c.Redis, c.Seed = cfg.Redis, cfg.Chat.Seed
	c.Events = "in process: each kv.Manager's subscriber → one goroutine per engine → fleet.Index (no ZMQ socket)"
	c.Processes = "in process: one kv.Manager per engine on the replay goroutine; metrics over loopback HTTP, scraped"
	remotes := []bool{false}
	if len(cfg.Redis) > 0 {
		remotes = append(remotes, true)
	} else {
		doc.RemoteSkipped = "no -redis: the remote-tier rows are skipped"
	}
	for _, remote := range remotes {
		for _, p := range []fleet.Policy{fleet.RoundRobin, fleet.KVAware} {
			run, err := fleetRunOne(cfg, plan, p, remote)
			if err != nil {
				return nil, fmt.Errorf("%v, remote %v: %w", p, remote, err)
			}
			doc.Runs = append(doc.Runs, run)
		}
	}
	return doc, nil
}

// fleetEvent is a copied kv.Event on its way to the index, or a flush
// marker.
type fleetEvent struct {
	ev    kv.Event
	flush chan struct{}
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

// fleetEngine is one engine of the fleet.
type fleetEngine struct {
	name   string
	idx    int
	pool   *locus.DefaultPool
	m      *kv.Manager
	host   *tier.Manager
	remote *tier.Manager // nil without -redis
	events chan fleetEvent
	evDone chan struct{} // closed when the event goroutine, once started, is done
	evUp   bool
	srv    *http.Server
	url    string

	learnMu sync.Mutex
	learn   []tier.Key // remote blocks other engines stored
	learned uint64

	pending, live []*fleetReq
	requests      int
	notRecomputed uint64
	deferred      uint64
	requeued      []*fleetReq // preempted this step
	readmit       readmits

	scrapedHits, scrapedLoaded atomic.Uint64 // the last scrape's values
}

func fleetRunOne(cfg fleetConfig, plan *bench.ChatPlan, policy fleet.Policy, remote bool) (run eval.FleetRun, err error) {
	start := time.Now()
	run = eval.FleetRun{Router: policy.String(), Remote: remote}
	x, err := fleet.NewIndex()
	if err != nil {
		return run, err
	}
	scorer, err := fleet.NewScorer(x, fleetWeights())
	if err != nil {
		return run, err
	}
	hasher, err := fleet.NewHasher(cfg.Chat.Hash, "", cfg.Chat.BlockSize)
	if err != nil {
		return run, err
	}
	ns := fmt.Sprintf("locus-eval-fleet:%d:%d:bs%d", os.Getpid(), time.Now().UnixNano(), cfg.Chat.BlockSize)
	engines := make([]*fleetEngine, cfg.Engines)
	names := make([]string, cfg.Engines)
	defer func() {
		for _, e := range engines {
			if e != nil {
				err = errors.Join(err, e.close())
			}
		}
	}()
	for i := range engines {
		names[i] = fmt.Sprintf("engine-%d", i)
		if engines[i], err = newFleetEngine(cfg, names[i], i, x, engines, remote, ns); err != nil {
			return run, err
		}
	}
	router, err := fleet.NewRouter(scorer, names, policy)
	if err != nil {
		return run, err
	}
	stopScrape := make(chan struct{})
	var scrapes, scrapeErrs atomic.Uint64
	var scraper sync.WaitGroup
	scraper.Go(func() {
		scrapeAll := func() {
			for _, e := range engines {
				if e.scrape() != nil {
					scrapeErrs.Add(1)
				} else {
					scrapes.Add(1)
				}
			}
		}
		scrapeAll() // once at the start, then every cfg.Scrape
		t := time.NewTicker(cfg.Scrape)
		defer t.Stop()
		for {
			select {
			case <-stopScrape:
				return
			case <-t.C:
				scrapeAll()
			}
		}
	})
	defer func() {
		select {
		case <-stopScrape:
		default:
			close(stopScrape)
		}
		scraper.Wait()
	}()

	var hashes []kv.Hash
	next, finished := 0, 0
	for step := 0; finished < len(plan.Requests); step++ {
		if step > plan.Steps+100000 {
			return run, fmt.Errorf("step %d: %d of %d requests finished", step, finished, len(plan.Requests))
		}
		for ; next < len(plan.Requests) && plan.Requests[next].Arrive <= step; next++ {
			r := &plan.Requests[next]
			hashes = hasher.Append(hashes[:0], r.Prompt, kv.Key{})
			d := router.Pick(hashes)
			if d.Score > 0 {
				run.ScoredPicks++
			}
			e := engines[d.Index]
			e.requests++
			e.pending = append(e.pending, &fleetReq{r: r})
		}
		for _, e := range engines {
			n, err := e.step()
			if err != nil {
				return run, fmt.Errorf("%s step %d: %w", e.name, step, err)
			}
			for range n {
				if err := router.Done(e.idx); err != nil {
					return run, err
				}
			}
			finished += n
		}
		for _, e := range engines { // the router sees every event of the step
			e.flush()
		}
	}
	close(stopScrape)
	scraper.Wait()
	run.Scrapes, run.ScrapeErrors = scrapes.Load(), scrapeErrs.Load()
	return fleetCollect(run, engines, x, start)
}

func newFleetEngine(cfg fleetConfig, name string, idx int, x *fleet.Index, all []*fleetEngine, remote bool, ns string) (e *fleetEngine, err error) {
	e = &fleetEngine{name: name, idx: idx, events: make(chan fleetEvent, 1024), evDone: make(chan struct{})}
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
	if remote {
		var opts []redis.Option
		if cfg.Cluster {
			opts = append(opts, redis.WithCluster())
		}
		opts = append(opts, redis.WithTTL(10*time.Minute), redis.WithTimeout(2*time.Second))
		rt, err := redis.Dial(cfg.Redis, ns, fleetBlockBytes, cfg.RemoteBlocks, opts...)
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
	remoteMedium := strings.ToLower(string(redis.Medium))
	e.evUp = true
	go func() { // the engine's event stream into the router's index
		defer close(e.evDone)
		for fe := range e.events {
			if fe.flush != nil {
				close(fe.flush)
				continue
			}
			_ = x.Apply(name, &fe.ev)
			if fe.ev.Kind != kv.BlockStored || x.Medium(fe.ev.Medium) != remoteMedium {
				continue
			}
			for _, o := range all { // the others learn the blocks it stored remotely
				if o == nil || o == e {
					continue
				}
				o.learnMu.Lock()
				for _, h := range fe.ev.Hashes {
					o.learn = append(o.learn, tier.KeyOf(h.AppendBytes(nil), 0))
				}
				o.learnMu.Unlock()
			}
		}
	}()
	sub := func(ev *kv.Event) {
		c := *ev
		c.Hashes, c.Tokens = slices.Clone(ev.Hashes), slices.Clone(ev.Tokens)
		e.events <- fleetEvent{ev: c}
	}
	if e.m, err = kv.New(e.pool, kv.WithTokensPerBlock(cfg.Chat.BlockSize), kv.WithHash(cfg.Chat.Hash, ""),
		kv.WithTiers(tiers...), kv.WithSubscriber(sub)); err != nil {
		return e, err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(metrics.NewManager("kv", e.m), metrics.NewTier("host", e.host))
	if e.remote != nil {
		reg.MustRegister(metrics.NewTier("remote", e.remote))
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

// step runs one engine step: learn the remote blocks others stored, admit
// what the router sent (waiting for tier loads), decode one token of every
// live request, release the finished ones, and let the tiers' copies
// complete. It returns the requests that finished.
func (e *fleetEngine) step() (finished int, err error) {
	if err := e.applyLearned(); err != nil {
		return 0, err
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
func (e *fleetEngine) applyLearned() error {
	e.learnMu.Lock()
	keys := e.learn
	e.learn = nil
	e.learnMu.Unlock()
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

// flush waits until the index has applied every event the engine emitted.
func (e *fleetEngine) flush() {
	done := make(chan struct{})
	e.events <- fleetEvent{flush: done}
	<-done
}

// scrape reads the engine's metrics over HTTP, as an operator's Prometheus
// would, and keeps two of them.
func (e *fleetEngine) scrape() error {
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(e.url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", e.url, resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		return err
	}
	sum := func(name string) float64 {
		var s float64
		if f, ok := fams[name]; ok {
			for _, m := range f.GetMetric() {
				s += m.GetCounter().GetValue()
			}
		}
		return s
	}
	e.scrapedHits.Store(uint64(sum("locus_kv_prefix_hit_tokens_total")))
	e.scrapedLoaded.Store(uint64(sum("locus_tier_loaded_bytes_total")))
	return nil
}

func (e *fleetEngine) close() error {
	var errs []error
	if e.srv != nil {
		errs = append(errs, e.srv.Close())
	}
	if e.m != nil {
		errs = append(errs, e.m.Close())
	}
	if e.evUp {
		close(e.events)
		<-e.evDone
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

// fleetCollect sums the engines' accounting into run, after one last
// publication and scrape of their metrics.
func fleetCollect(run eval.FleetRun, engines []*fleetEngine, x *fleet.Index, start time.Time) (eval.FleetRun, error) {
	media := []string{"CPU"}
	if run.Remote {
		media = append(media, string(redis.Medium))
	}
	run.Tiers = make([]eval.FleetTier, len(media))
	for i, m := range media {
		run.Tiers[i].Medium = m
	}
	run.ScrapeMatches = true
	for _, e := range engines {
		st := e.m.Stats() // publishes the snapshot the scrape reads
		e.host.Stats()
		if e.remote != nil {
			e.remote.Stats()
		}
		if err := e.scrape(); err != nil {
			return run, err
		}
		run.Scrapes++
		// First admissions only: readmissions after preemption left out.
		c := hitCounts(st)
		c.query -= e.readmit.query
		c.hot -= e.readmit.hot
		c.host -= e.readmit.host
		c.remote -= e.readmit.remote
		hits := c.hot + c.host + c.remote
		run.Requests += e.requests
		run.PromptTokens += c.query
		run.HitHot += c.hot
		run.HitHost += c.host
		run.HitRemote += c.remote
		run.NotRecomputed += e.notRecomputed
		run.Deferred += e.deferred
		run.Preemptions += st.Preemptions
		for i := range media {
			run.Tiers[i].StoredBytes += st.Tiers[i].StoredBlocks * fleetBlockBytes
			run.Tiers[i].LoadedBytes += st.Tiers[i].LoadedBlocks * fleetBlockBytes
		}
		if run.Remote {
			run.Tiers[1].Learned += e.learned
		}
		ed := eval.FleetEngine{Name: e.name, MetricsURL: e.url, Requests: e.requests, PromptTokens: c.query, HitTokens: hits,
			ScrapedHits: float64(e.scrapedHits.Load()), ScrapedLoaded: float64(e.scrapedLoaded.Load())}
		if c.query > 0 {
			ed.HitRate = float64(hits) / float64(c.query)
		}
		if uint64(ed.ScrapedHits) != st.HitTokens {
			run.ScrapeMatches = false
		}
		run.Engines = append(run.Engines, ed)
	}
	run.HitTokens = run.HitHot + run.HitHost + run.HitRemote
	if run.PromptTokens > 0 {
		run.HitRate = float64(run.HitTokens) / float64(run.PromptTokens)
	}
	ist := x.Stats()
	run.IndexEvents, run.IndexOrphans = ist.Stored+ist.Removed+ist.Cleared, ist.Orphans
	run.Seconds = time.Since(start).Seconds()
	return run, nil
}
