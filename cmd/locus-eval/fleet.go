package main

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/locus-go/locus/bench"
	"github.com/locus-go/locus/cmd/locus-eval/internal/eval"
	"github.com/locus-go/locus/fleet"
	"github.com/locus-go/locus/kv"
	"github.com/locus-go/locus/tier"
	"github.com/locus-go/locus/tier/redis"
)

// The fleet subcommand: N engines, each a kv.Manager over a hot pool too
// small for every conversation, with a host tier and optionally a remote
// tier on Redis shared by all, behind a router (fleet.Router, KV-aware or
// round-robin) that replays the chat workload. Each engine runs in a child
// process of its own (fleet_proc.go) that publishes its events with
// kv/events over ZMQ, followed into the router's fleet.Index with
// fleet.Follow; with -inprocess they run on the replay goroutine and their
// events reach the index in process. Each engine serves its own Prometheus
// registry on a loopback HTTP port that the run scrapes while it replays.
//
// Both modes give the same counts on the same seed: the engines step one
// after another, in engine order; the index applies each engine's events
// of a step before the next engine steps; and the blocks an engine stored
// in the remote tier during a step are handed to the others, in engine
// order, at the start of the next one.

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
	InProcess    bool
}

func runFleet(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("locus-eval fleet", `Usage: locus-eval fleet [flags]

Replays the chat workload on a fleet of engines (an extension beyond LOCUS-EVAL v1): each engine is a
kv.Manager over a hot pool too small for every conversation, with a host tier and, with -redis, a remote
tier on Redis shared by all engines; a router sends each request to an engine, round-robin or KV-aware
(fleet.Router: llm-d's longest-prefix score over the engines' KV events). It prints, for each router with
and without the remote tier, the fleet's prefix-hit tokens per tier, the tokens not recomputed, the bytes
each tier stored and loaded, and the router's decisions per engine. Each engine runs in a child process
that publishes its KV events over ZMQ (kv/events), which the router follows (fleet.Follow); with
-inprocess the engines run in this process. Each serves its metrics on a loopback HTTP port, scraped
during the run.

Flags:
`, stderr)
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
	fs.BoolVar(&cfg.InProcess, "inprocess", false, "run the engines in this process, their events handed to the router's index without a socket (the same counts)")
	asJSON := fs.Bool("json", false, "print a JSON document instead of the table")
	if err := parseFlags(fs, args); err != nil {
		return err
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
	if cfg.InProcess {
		c.Events = "in process: each kv.Manager's subscriber → the engine's buffer → fleet.Index at the end of its step (no ZMQ socket)"
		c.Processes = "in process: one kv.Manager per engine on the replay goroutine; metrics over loopback HTTP, scraped"
	} else {
		c.Events = "kv/events Publisher per engine (ZMQ PUB on loopback, replay socket) → fleet.Follow → fleet.Index; each engine's step applied before the next engine steps"
		c.Processes = fmt.Sprintf("%d child processes (locus-eval fleet-engine), one per engine, stepped over stdin/stdout; metrics over loopback HTTP, scraped", cfg.Engines)
	}
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

// fleetScrape is what the last scrape of one engine's metrics read.
type fleetScrape struct {
	url          string
	hits, loaded atomic.Uint64
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
	members := make([]fleetMember, cfg.Engines)
	names := make([]string, cfg.Engines)
	defer func() {
		for _, m := range members {
			if m != nil {
				err = errors.Join(err, m.close())
			}
		}
	}()
	for i := range members {
		names[i] = fmt.Sprintf("engine-%d", i)
		spec := fleetSpec{Name: names[i], Model: fleetModel, Config: cfg, Remote: remote, Namespace: ns, Requests: len(plan.Requests)}
		if fleetTestSpec != nil {
			fleetTestSpec(&spec)
		}
		if cfg.InProcess {
			members[i], err = newFleetLocal(spec, plan, x)
		} else {
			members[i], err = startFleetChild(spec, x)
		}
		if err != nil {
			members[i] = nil
			return run, err
		}
	}
	router, err := fleet.NewRouter(scorer, names, policy)
	if err != nil {
		return run, err
	}
	scrapes := make([]*fleetScrape, len(members))
	for i, m := range members {
		scrapes[i] = &fleetScrape{url: m.metricsURL()}
	}
	stopScrape := make(chan struct{})
	var scrapeOK, scrapeErrs atomic.Uint64
	var scraper sync.WaitGroup
	scraper.Go(func() {
		scrapeAll := func() {
			for _, s := range scrapes {
				if s.scrape() != nil {
					scrapeErrs.Add(1)
				} else {
					scrapeOK.Add(1)
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
	admit := make([][]int, len(members))
	learn := make([][]tier.Key, len(members))
	requests := make([]int, len(members))
	next, finished := 0, 0
	for step := 0; finished < len(plan.Requests); step++ {
		if step > plan.Steps+100000 {
			return run, fmt.Errorf("step %d: %d of %d requests finished", step, finished, len(plan.Requests))
		}
		for i := range admit {
			admit[i] = admit[i][:0]
		}
		for ; next < len(plan.Requests) && plan.Requests[next].Arrive <= step; next++ {
			hashes = hasher.Append(hashes[:0], plan.Requests[next].Prompt, kv.Key{})
			d := router.Pick(hashes)
			if d.Score > 0 {
				run.ScoredPicks++
			}
			requests[d.Index]++
			admit[d.Index] = append(admit[d.Index], next)
		}
		// One engine after another, in engine order: each step's events
		// reach the index before the next engine steps, and what each
		// stored remotely goes to the others in engine order.
		var stored [][]tier.Key
		for i, m := range members {
			n, s, err := m.step(step, admit[i], learn[i])
			if err != nil {
				return run, err // it names the engine and the step
			}
			for range n {
				if err := router.Done(i); err != nil {
					return run, err
				}
			}
			finished += n
			stored = append(stored, s)
		}
		for i := range learn {
			learn[i] = learn[i][:0]
			for j, s := range stored {
				if j != i {
					learn[i] = append(learn[i], s...)
				}
			}
		}
	}
	close(stopScrape)
	scraper.Wait()
	run.Scrapes, run.ScrapeErrors = scrapeOK.Load(), scrapeErrs.Load()
	return fleetCollect(run, members, scrapes, requests, x, start)
}

// fleetModel is the model name in the engines' event topics.
const fleetModel = "locus-eval-chat"

// fleetTestSpec, when set (by tests), edits each engine's spec.
var fleetTestSpec func(*fleetSpec)

// scrape reads the engine's metrics over HTTP, as an operator's Prometheus
// would, and keeps two of them.
func (s *fleetScrape) scrape() error {
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(s.url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", s.url, resp.Status)
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
	s.hits.Store(uint64(sum("locus_kv_prefix_hit_tokens_total")))
	s.loaded.Store(uint64(sum("locus_tier_loaded_bytes_total")))
	return nil
}

// fleetCollect sums the engines' accounting into run, after one last
// publication and scrape of their metrics.
func fleetCollect(run eval.FleetRun, members []fleetMember, scrapes []*fleetScrape, requests []int, x *fleet.Index, start time.Time) (eval.FleetRun, error) {
	media := []string{"CPU"}
	if run.Remote {
		media = append(media, string(redis.Medium))
	}
	run.Tiers = make([]eval.FleetTier, len(media))
	for i, m := range media {
		run.Tiers[i].Medium = m
	}
	run.ScrapeMatches = true
	for i, m := range members {
		t, err := m.totals() // publishes the snapshot the scrape reads
		if err != nil {
			return run, err
		}
		if len(t.StoredBlocks) < len(media) || len(t.LoadedBlocks) < len(media) {
			return run, fmt.Errorf("engine-%d: %d tiers, want %d", i, len(t.StoredBlocks), len(media))
		}
		s := scrapes[i]
		if err := s.scrape(); err != nil {
			return run, err
		}
		run.Scrapes++
		// First admissions only: readmissions after preemption left out.
		hits := t.Hot + t.Host + t.Remote
		run.Requests += requests[i]
		run.PromptTokens += t.Query
		run.HitHot += t.Hot
		run.HitHost += t.Host
		run.HitRemote += t.Remote
		run.NotRecomputed += t.NotRecomputed
		run.Deferred += t.Deferred
		run.Preemptions += t.Preemptions
		for j := range media {
			run.Tiers[j].StoredBytes += t.StoredBlocks[j] * fleetBlockBytes
			run.Tiers[j].LoadedBytes += t.LoadedBlocks[j] * fleetBlockBytes
		}
		if run.Remote {
			run.Tiers[1].Learned += t.Learned
		}
		ed := eval.FleetEngine{Name: fmt.Sprintf("engine-%d", i), MetricsURL: s.url, Requests: requests[i], PromptTokens: t.Query, HitTokens: hits,
			ScrapedHits: float64(s.hits.Load()), ScrapedLoaded: float64(s.loaded.Load())}
		if t.Query > 0 {
			ed.HitRate = float64(hits) / float64(t.Query)
		}
		if s.hits.Load() != t.HitTokens {
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
