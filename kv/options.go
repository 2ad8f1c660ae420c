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
	window         int // sliding window in tokens; 0: full attention
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
	promotion      Promotion
	cost           LoadCost
	policy         LoadPolicy
}

// Defaults of New.
const (
	// DefaultTokensPerBlock is vLLM's default block size.
	DefaultTokensPerBlock = 16
	// DefaultMaxPinned is the share of the pool pins may hold unless
	// WithMaxPinned says otherwise.
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

// WithSlidingWindow makes the manager's sequences sliding-window
// attention sequences of window tokens: a token attends to itself and the
// window-1 tokens before it, so a block whose tokens all lie before the
// window of the next token to compute is of no more use to its sequence.
// At each Append, Reserve or Accept, before allocating, the manager
// releases those blocks, last first, as vLLM's sliding-window manager
// does: a full block stays in the prefix cache, evictable, and the rest go
// back to the pool (even when the call is then refused for lack of
// blocks: the sequence has no more use for them). The sequence's block table keeps a zero pool.Handle in
// their place (vLLM's null block), so that block k still holds tokens
// k*TokensPerBlock onwards; Block fails with ErrOutsideWindow for their
// tokens. A sequence then holds about window/TokensPerBlock + 1 blocks
// however long it grows, plus the blocks of what one call appends.
//
// A prefix hit needs only the window: Admit, CanAdmit and Lookup search
// the prompt's full blocks right to left for the last run of
// ceil((window-1)/TokensPerBlock) cached blocks (at least one) that ends
// before the block of the last token, and the hit ends with that run; the
// blocks before it are not held (zero handles). Pin, Unpin and Reset work
// on whole prefixes as without a window.
//
// Use it for a model whose every attention layer slides (Mistral-7B v0.1),
// and, through NewGroups, for the sliding-window layers of a hybrid model.
// Do not use it for a model that mixes sliding and full attention in one
// pool: the full-attention layers need every block. A window of 0 (the
// default) is full attention; a negative one fails with
// pool.ErrInvalidConfig, and so does a window together with WithTiers (the
// tiers do not support windows yet).
func WithSlidingWindow(window int) Option {
	return optionFunc(func(c *config) { c.window = window })
}

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

// WithMaxPinned caps the share of the pool that pinned blocks may hold, so
// that pins cannot starve admissions: 0 < share <= 1, rounded down to
// whole blocks (a share below one block forbids pinning). Without the
// option the cap is DefaultMaxPinned, half the pool; 0 means no cap
// (pins may hold the whole pool, and then starve admissions), and a share
// outside 0 to 1 fails New with ErrInvalidConfig. (Before this version 0
// forbade pinning; a share under one block does that now.)
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
	case c.window < 0:
		return fmt.Errorf("kv: %w: sliding window of %d tokens", pool.ErrInvalidConfig, c.window)
	case c.window > 0 && len(c.tiers) > 0:
		return fmt.Errorf("kv: %w: a sliding window with tiers", pool.ErrInvalidConfig)
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
