package kv

import (
	"fmt"
	"time"

	"github.com/locus-go/locus/pool"
)

// FreedOrder says where a block goes when its last holder releases it and
// it has no hash (a partial block, or a duplicate of a cached one).
type FreedOrder uint8

const (
	// ReuseFreedFirst, the default, returns such a block to the pool at
	// once, so the next allocation reuses it before any cached block is
	// evicted: it holds nothing anyone can hit, while a cached block might
	// still be hit. This is vLLM's order since 2026 (unhashed blocks are
	// put at the front of its free queue), and with a LIFO pool it also
	// reuses the most recently written memory.
	ReuseFreedFirst FreedOrder = iota + 1
	// QueueFreedBehindCached appends such a block to the eviction order,
	// behind the cached blocks freed before it, as vLLM's single free
	// queue did until 2026: an allocation takes the least recently freed
	// block, cached or not, and so evicts cached blocks while younger
	// empty ones wait. Choose it to reproduce that order; the block still
	// counts as free.
	QueueFreedBehindCached
)

// String returns the order's name.
func (o FreedOrder) String() string {
	switch o {
	case ReuseFreedFirst:
		return "reuse-freed-first"
	case QueueFreedBehindCached:
		return "queue-freed-behind-cached"
	}
	return fmt.Sprintf("FreedOrder(%d)", uint8(o))
}

// Priority is a block's retention priority: when blocks must be evicted,
// cached blocks of a lower priority go first, least recently used first
// within one priority.
type Priority uint8

// The range of priorities. The default sits low in the range, as in
// TensorRT-LLM, so that a request can mark blocks both as more and as less
// worth keeping than ordinary ones.
const (
	MinPriority     Priority = 0
	DefaultPriority Priority = 35
	MaxPriority     Priority = 100
)

// Option configures a Manager.
type Option interface{ apply(*config) }

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

type config struct {
	tokensPerBlock int
	caching        bool
	algo           HashAlgo
	seed           string
	freed          FreedOrder
	high, low      float64
	maxPinned      float64
	subscriber     func(*Event)
	clock          func() time.Time
	tiers          []Tier
	demotion       Demotion
	cost           LoadCost
	policy         LoadPolicy
}

// Defaults of New.
const (
	// DefaultTokensPerBlock is vLLM's default block size.
	DefaultTokensPerBlock = 16
	// DefaultMaxPinned is the share of the pool pins may hold.
	DefaultMaxPinned = 0.5
)

func defaults() config {
	return config{
		tokensPerBlock: DefaultTokensPerBlock,
		caching:        true,
		algo:           SHA256CBOR,
		freed:          ReuseFreedFirst,
		maxPinned:      DefaultMaxPinned,
		clock:          time.Now,
		demotion:       WriteThrough,
		policy:         CostPolicy,
	}
}

// WithTokensPerBlock sets how many tokens a block holds (default
// DefaultTokensPerBlock), 1 to MaxTokensPerBlock.
func WithTokensPerBlock(n int) Option { return optionFunc(func(c *config) { c.tokensPerBlock = n }) }

// WithPrefixCaching turns the prefix cache on (the default) or off, as
// vLLM's enable_prefix_caching does. Off, the manager hashes no block,
// reuses none (Admit, Lookup and CanAdmit report no cached tokens), keeps
// no released block (a sequence's blocks go back to the pool when its last
// holder releases it), pins nothing, emits no event and counts no prefix
// lookups; admissions fail with plain exhaustion when the free blocks are
// too few. Fork, copy-on-write, lookahead reservations, preemption and
// releasers work as with the cache.
//
// Turn it off when prompts share nothing worth reusing (so hashing each
// full block, SHA-256 by default, is pure cost) or when a deployment must
// not let one request's KV be reused by another. Keep it on for chat,
// agents, shared system prompts and anything a KV-aware router routes.
func WithPrefixCaching(on bool) Option { return optionFunc(func(c *config) { c.caching = on }) }

// WithHash sets the block hash algorithm (default SHA256CBOR) and the seed
// its chains start from (default ""). To share block hashes with vLLM
// engines, use the algorithm they run with and their PYTHONHASHSEED as the
// seed; a seed is also how to keep the hashes of two deployments apart.
func WithHash(algo HashAlgo, seed string) Option {
	return optionFunc(func(c *config) { c.algo, c.seed = algo, seed })
}

// WithFreedOrder sets where a released block without a hash goes (default
// ReuseFreedFirst).
func WithFreedOrder(o FreedOrder) Option { return optionFunc(func(c *config) { c.freed = o }) }

// WithWatermarks turns on proactive eviction: when Drain finds the blocks in
// use and cached at or above high (a share of the pool, 0 < low < high <=
// 1), it evicts cached blocks until they are at or below low, so that the
// allocations of the next steps find free blocks without evicting. The
// band between the two keeps evictions from alternating with allocations.
// By default there are no watermarks: cached blocks are evicted only when
// an allocation needs them, as in vLLM.
func WithWatermarks(high, low float64) Option {
	return optionFunc(func(c *config) { c.high, c.low = high, low })
}

// WithMaxPinned caps the share of the pool that pinned blocks may hold
// (default DefaultMaxPinned; 0 forbids pinning), so that pins can never
// starve admissions.
func WithMaxPinned(share float64) Option { return optionFunc(func(c *config) { c.maxPinned = share }) }

// WithSubscriber makes the manager call fn with every cache event (see
// Event). Without it no event is built. fn runs on the owner goroutine in
// the middle of the manager call that changed the cache: it must not call the
// manager, and it should not panic. If it does, the manager recovers, drops
// that event, counts it in Stats.SubscriberPanics and finishes the call, so
// its state stays consistent and no sequence or block is lost.
func WithSubscriber(fn func(*Event)) Option { return optionFunc(func(c *config) { c.subscriber = fn }) }

// WithClock sets the clock that times priority durations (default
// time.Now); tests pass a fake one.
func WithClock(now func() time.Time) Option { return optionFunc(func(c *config) { c.clock = now }) }

// MaxTokensPerBlock bounds WithTokensPerBlock: engines use 16 to 256 tokens
// a block (a whole adapter-sized run is still far below it), and a manager
// keeps a block's partial tokens in memory.
const MaxTokensPerBlock = 1 << 16

func (c *config) validate() error {
	switch {
	case c.tokensPerBlock <= 0 || c.tokensPerBlock > MaxTokensPerBlock:
		return fmt.Errorf("kv: %w: %d tokens per block", pool.ErrInvalidConfig, c.tokensPerBlock)
	case c.algo.size() == 0:
		return fmt.Errorf("kv: %w: hash algorithm %v", pool.ErrInvalidConfig, c.algo)
	case c.freed != ReuseFreedFirst && c.freed != QueueFreedBehindCached:
		return fmt.Errorf("kv: %w: %v", pool.ErrInvalidConfig, c.freed)
	case (c.high != 0 || c.low != 0) && !(0 < c.low && c.low < c.high && c.high <= 1):
		return fmt.Errorf("kv: %w: watermarks %v, %v; want 0 < low < high <= 1", pool.ErrInvalidConfig, c.high, c.low)
	case !(c.maxPinned >= 0 && c.maxPinned <= 1):
		return fmt.Errorf("kv: %w: pinned share %v; want 0 to 1", pool.ErrInvalidConfig, c.maxPinned)
	case c.clock == nil:
		return fmt.Errorf("kv: %w: nil clock", pool.ErrInvalidConfig)
	}
	return nil
}
