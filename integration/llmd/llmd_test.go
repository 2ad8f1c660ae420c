package llmd

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/llm-d/llm-d-kv-cache/pkg/kvcache"
	"github.com/llm-d/llm-d-kv-cache/pkg/kvcache/kvblock"
	"github.com/llm-d/llm-d-kv-cache/pkg/kvevents"
	"github.com/llm-d/llm-d-kv-cache/pkg/kvevents/engineadapter"

	"github.com/locus-go/locus/backing/heap"
	"github.com/locus-go/locus/fleet"
	"github.com/locus-go/locus/kv"
	"github.com/locus-go/locus/kv/events"
	"github.com/locus-go/locus/policy/lifo"
	"github.com/locus-go/locus/pool"
	"github.com/locus-go/locus/tier"
	"github.com/locus-go/locus/tier/host"
	"github.com/locus-go/locus/transport/mailbox"
)

const (
	model          = "meta-llama/Llama-3.1-8B"
	tokensPerBlock = 16
	blockBytes     = 1024
	// wait bounds every wait for llm-d's workers to apply a batch.
	wait = 10 * time.Second
)

// router is llm-d's side, built only from llm-d's exported code: the
// event pool with its vLLM adapter, subscribers that dial each engine's
// publisher, the in-memory index, the token processor that derives the
// router's own block keys from a prompt, and the longest-prefix scorer with
// its default medium weights (gpu 1.0, cpu 0.8). Beside it, locus's own
// fleet index and scorer get the same events in process, and every score
// llm-d gives must be theirs exactly.
type router struct {
	pool   *kvevents.Pool
	subs   *kvevents.SubscriberManager
	index  kvblock.Index
	tokens kvblock.TokenProcessor
	scorer kvcache.KVBlockScorer
	ctx    context.Context

	fleet  *fleet.Index
	fscore *fleet.Scorer
	hasher *fleet.Hasher
}

func newRouter(t *testing.T) *router {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	index, err := kvblock.NewInMemoryIndex(kvblock.DefaultInMemoryIndexConfig())
	must(t, err)
	cfg := kvblock.DefaultTokenProcessorConfig()
	cfg.BlockSizeTokens = tokensPerBlock
	tokens, err := kvblock.NewChunkedTokenDatabase(cfg)
	must(t, err)
	adapter, err := engineadapter.NewAdapter("vllm")
	must(t, err)
	pcfg := kvevents.DefaultConfig()
	pcfg.DiscoverPods = false
	pcfg.Concurrency = 2
	p := kvevents.NewPool(pcfg, index, tokens, adapter)
	p.Start(ctx)
	scorer, err := kvcache.NewKVBlockScorer(kvcache.DefaultKVBlockScorerConfig())
	must(t, err)
	r := &router{pool: p, subs: kvevents.NewSubscriberManager(p), index: index, tokens: tokens, scorer: scorer, ctx: ctx}
	r.fleet, err = fleet.NewIndex()
	must(t, err)
	r.fscore, err = fleet.NewScorer(r.fleet, fleet.DefaultWeights())
	must(t, err)
	r.hasher, err = fleet.NewHasher(kv.SHA256CBOR, "", tokensPerBlock)
	must(t, err)
	t.Cleanup(func() {
		r.subs.Shutdown(ctx)
		cancel()
		p.Shutdown(context.Background())
	})
	return r
}

// scores is what llm-d's scorer says about a prompt, per pod.
func (r *router) scores(t *testing.T, prompt []uint32) map[string]float64 {
	t.Helper()
	keys, err := r.tokens.TokensToKVBlockKeys(kvblock.EmptyBlockHash, prompt, model, nil)
	must(t, err)
	hits, err := r.index.Lookup(r.ctx, keys, nil)
	must(t, err)
	s, err := r.scorer.Score(r.ctx, keys, hits)
	must(t, err)
	return s
}

// expect waits until llm-d's scores for prompt are want (pods absent from
// want score 0), and fails with the last scores seen.
func (r *router) expect(t *testing.T, what string, prompt []uint32, want map[string]float64) {
	t.Helper()
	deadline := time.Now().Add(wait)
	var got map[string]float64
	for {
		got = r.scores(t, prompt)
		if same(got, want) {
			// locus's fleet scorer saw the same events, in process.
			if own := r.fscore.Score(r.hasher.Append(nil, prompt, kv.Key{})); !same(own, got) || !same(got, own) {
				t.Fatalf("%s: fleet scores %v, llm-d's %v", what, own, got)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: llm-d scores %v, want %v", what, got, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func same(got, want map[string]float64) bool {
	for pod, w := range want {
		if math.Abs(got[pod]-w) > 1e-9 {
			return false
		}
	}
	for pod, g := range got {
		if _, ok := want[pod]; !ok && g != 0 {
			return false
		}
	}
	return true
}

// engine is one locus engine: a hot pool of blocks, optionally a host tier
// behind it, and a publisher of its events on a loopback port.
type engine struct {
	pod  string
	m    *kv.Manager
	pub  *events.Publisher
	host *tier.Manager
}

func newEngine(t *testing.T, r *router, pod string, hotBlocks, hostBlocks int) *engine {
	t.Helper()
	b, err := heap.New(blockBytes, hotBlocks)
	must(t, err)
	p, err := pool.New(b, mailbox.New(), lifo.Policy{})
	must(t, err)
	t.Cleanup(func() { _ = p.Close() })
	pub, err := events.New("tcp://127.0.0.1:0", events.WithTopic(events.Topic(pod, model)),
		events.WithFlushInterval(time.Millisecond))
	must(t, err)
	t.Cleanup(func() { _ = pub.Close() })
	e := &engine{pod: pod, pub: pub}
	publish, index := pub.Subscriber(), r.fleet.Subscriber(pod)
	both := func(ev *kv.Event) { publish(ev); index(ev) }
	opts := []kv.Option{kv.WithTokensPerBlock(tokensPerBlock), kv.WithSubscriber(both)}
	if hostBlocks > 0 {
		st, err := host.New(blockBytes, hostBlocks)
		must(t, err)
		e.host, err = tier.New(st)
		must(t, err)
		t.Cleanup(func() { _ = e.host.Close() })
		opts = append(opts, kv.WithTiers(e.host))
	}
	e.m, err = kv.New(p, opts...)
	must(t, err)
	t.Cleanup(func() { _ = e.m.Close() })

	// llm-d dials the engine's publisher, as it dials a vLLM pod.
	must(t, r.subs.EnsureSubscriber(r.ctx, pod, "tcp://"+pub.Addr().String(), "kv@", true))
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	must(t, pub.WaitSubscribers(ctx, 1))
	return e
}

// serve admits a prompt, "computes" it and releases it, then drains until
// every copy to a tier has completed, as an engine does between steps.
func (e *engine) serve(t *testing.T, prompt []uint32) {
	t.Helper()
	id, _, err := e.m.Admit(prompt, kv.Key{})
	must(t, err)
	for {
		_, err := e.m.Drain()
		must(t, err)
		if _, ready, err := e.m.Ready(id); err != nil {
			t.Fatal(err)
		} else if ready {
			break
		}
		time.Sleep(time.Millisecond)
	}
	must(t, e.m.Release(id))
	e.settle(t)
}

// settle drains until no copy is in flight and flushes the events.
func (e *engine) settle(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for {
		_, err := e.m.Drain()
		must(t, err)
		if e.m.Stats().InFlight == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("copies still in flight")
		}
		time.Sleep(time.Millisecond)
	}
	e.pub.Flush()
}

// prompt is n full blocks of tokens starting at first, plus one token so
// that all n blocks are full and cacheable.
func prompt(first uint32, n int) []uint32 {
	p := make([]uint32, n*tokensPerBlock+1)
	for i := range p {
		p[i] = first + uint32(i)
	}
	return p
}

// A prefix computed on an engine scores at llm-d's gpu weight per block;
// once the hot pool evicts it (its copy in the host tier stays) at the cpu
// weight; once the host tier evicts it too, at 0.
func TestScoresFollowTheBlockAcrossTiers(t *testing.T) {
	r := newRouter(t)
	// 9 hot blocks (a prompt of 8 full blocks and a token needs all of
	// them), 16 host blocks.
	e := newEngine(t, r, "pod-a", 9, 16)
	a := prompt(1000, 6)

	e.serve(t, a)
	r.expect(t, "computed and cached in the hot pool", a, map[string]float64{"pod-a": 6})

	// Another prompt needs the pool: a's blocks are evicted from it. They
	// were written through to the host tier, which announced them as CPU.
	b := prompt(50_000, 8)
	e.serve(t, b)
	r.expect(t, "a in the host tier only", a, map[string]float64{"pod-a": 6 * 0.8})
	r.expect(t, "b in the hot pool", b, map[string]float64{"pod-a": 8})

	// Two more prompts of 8 blocks pass through the 16-slot host tier: a's
	// copies are evicted there too.
	e.serve(t, prompt(90_000, 8))
	e.serve(t, prompt(130_000, 8))
	r.expect(t, "a gone from every tier", a, map[string]float64{})

	st := e.m.Stats()
	if st.Tiers[0].StoredBlocks == 0 {
		t.Fatalf("the host tier stored nothing: %+v", st.Tiers[0])
	}
}

// A hit for the first blocks only scores those: the longest prefix.
func TestScoresArePrefixLengths(t *testing.T) {
	r := newRouter(t)
	e := newEngine(t, r, "pod-a", 32, 0)
	long := prompt(7, 10)
	e.serve(t, long[:4*tokensPerBlock+1])
	r.expect(t, "four of ten blocks cached", long, map[string]float64{"pod-a": 4})
	e.serve(t, long)
	r.expect(t, "all ten cached", long, map[string]float64{"pod-a": 10})
}

// Two engines: the router tells them apart by the pod in the topic, and a
// prompt scores on the engine that computed it.
func TestScoresPerEngine(t *testing.T) {
	r := newRouter(t)
	a := newEngine(t, r, "pod-a", 16, 0)
	b := newEngine(t, r, "pod-b", 16, 0)
	shared := prompt(3, 3)
	onlyB := prompt(70_000, 5)
	a.serve(t, shared)
	b.serve(t, shared)
	b.serve(t, onlyB)
	r.expect(t, "shared prefix on both", shared, map[string]float64{"pod-a": 3, "pod-b": 3})
	r.expect(t, "b's prompt on b", onlyB, map[string]float64{"pod-b": 5})
}

// Reset with no tier empties the prefix cache: AllBlocksCleared, and llm-d
// drops the pod's entries.
func TestResetClears(t *testing.T) {
	r := newRouter(t)
	e := newEngine(t, r, "pod-a", 16, 0)
	a := prompt(11, 5)
	e.serve(t, a)
	r.expect(t, "cached", a, map[string]float64{"pod-a": 5})
	_, err := e.m.Reset()
	must(t, err)
	e.pub.Flush()
	r.expect(t, "after Reset", a, map[string]float64{})
	// The engine computes it again: it scores again.
	e.serve(t, a)
	r.expect(t, "computed again", a, map[string]float64{"pod-a": 5})
}

// Small hashes are where a decoder that expects 8-byte integers breaks;
// locus writes every hash as a uint64. Many distinct prompts make a hash
// below 2^32 likely in none of them, so this checks the form directly:
// every block of every prompt is indexed by llm-d.
func TestManyPromptsAllIndexed(t *testing.T) {
	r := newRouter(t)
	e := newEngine(t, r, "pod-a", 256, 0)
	var ps [][]uint32
	for i := range 20 {
		p := prompt(uint32(200_000+i*1000), 1+i%5)
		e.serve(t, p)
		ps = append(ps, p)
	}
	for i, p := range ps {
		r.expect(t, fmt.Sprintf("prompt %d", i), p, map[string]float64{"pod-a": float64(len(p) / tokensPerBlock)})
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// The orphan: two sequences compute the same first block at once; the
// manager caches the first copy and keeps the second private. When the
// cached copy is evicted (BlockRemoved), the second sequence's next full
// block goes out as BlockStored with a parent llm-d no longer knows, and
// llm-d drops it. The engine's own prefix cache cannot serve that block
// either (a hit walks the chain from the first block, which is gone), so
// the router reports exactly what the engine can hit: 0 for the prompt,
// on both sides.
func TestOrphanAgreesWithTheEngine(t *testing.T) {
	r := newRouter(t)
	e := newEngine(t, r, "pod-a", 6, 0)
	p := prompt(5, 2) // two full blocks and a token
	x, _, err := e.m.Admit(p[:1], kv.Key{})
	must(t, err)
	y, _, err := e.m.Admit(p[:1], kv.Key{})
	must(t, err)
	must(t, e.m.Append(x, p[1:tokensPerBlock+1])) // x's first block: cached
	must(t, e.m.Append(y, p[1:tokensPerBlock+1])) // y's equal block: private
	must(t, e.m.Release(x))
	e.settle(t)
	r.expect(t, "x's first block", p, map[string]float64{"pod-a": 1})

	// A prompt of four blocks takes the free three and evicts x's copy.
	z := prompt(80_000, 3)
	e.serve(t, z)
	r.expect(t, "x's copy evicted", p, map[string]float64{})

	// y's second block fills: BlockStored with the evicted block as parent.
	must(t, e.m.Append(y, p[tokensPerBlock+1:]))
	e.settle(t)
	// Events of one pod are applied in order: once a later prompt scores,
	// y's event has been seen.
	w := prompt(120_000, 1)
	e.serve(t, w)
	r.expect(t, "a later prompt", w, map[string]float64{"pod-a": 1})

	cached, err := e.m.Lookup(p, kv.Key{})
	must(t, err)
	if cached != 0 {
		t.Fatalf("the engine would serve %d cached tokens of the prompt; the router says 0", cached)
	}
	r.expect(t, "y's orphan", p, map[string]float64{})
	must(t, e.m.Release(y))
}

// Reset with a host tier whose copies stay: the manager removes the hot
// pool's blocks one by one (BlockRemoved, GPU) instead of the pod-wide
// AllBlocksCleared, so llm-d keeps the CPU entries and the prompt scores
// at the cpu weight.
func TestResetKeepsTierEntries(t *testing.T) {
	r := newRouter(t)
	e := newEngine(t, r, "pod-a", 16, 16)
	a := prompt(21, 5)
	e.serve(t, a)
	r.expect(t, "cached, and stored in the host tier", a, map[string]float64{"pod-a": 5})
	_, err := e.m.Reset()
	must(t, err)
	e.pub.Flush()
	r.expect(t, "after Reset", a, map[string]float64{"pod-a": 5 * 0.8})
}
