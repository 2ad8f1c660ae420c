// Package redis is a tier.Storage on Redis or Redis Cluster (or Valkey): a
// remote tier that several engines share, as LMCache's Redis backend is.
// Put a tier.Manager over it, behind the host tier, as the disk tier is.
//
// A block is one Redis value under the key
//
//	<namespace>:<hash in hex>:<group>
//
// so that every engine of a fleet that uses the same namespace finds the
// blocks the others stored (the key is the block's content hash). The
// namespace must name everything that changes a block's bytes for the same
// hash: the model and its revision, the KV dtype and layout, the
// tensor-parallel rank, the block size. Engines with different namespaces
// never read each other's blocks.
//
// Every value starts with a 72-byte header (HeaderSize): the block's key,
// its length, a CRC-32C of the payload, the write generation and writer,
// and a CRC-32C of the header. A value is served only if it holds exactly
// the block asked for, intact: a value of another key, a truncated or
// corrupt one, or one this Tier wrote with another generation (stale) fails
// with an error wrapping tier.ErrCorrupt, and the tier.Manager drops the
// block. A value another engine wrote for the same key is the same block
// (same content hash, same namespace) and is served.
//
// Every call is bounded by WithTimeout. A server that stalls, dies or
// restarts empty costs the engine only its remote hits: calls fail within
// the timeout (ErrUnavailable), a key the server no longer holds (evicted
// by maxmemory, expired by WithTTL, lost in a restart) is a miss (ErrGone,
// which also wraps tier.ErrCorrupt so that the Manager drops the block),
// the client reconnects by itself, and the engine keeps serving from its
// local tiers. Stats counts each kind of failure.
//
// The Manager's index is this engine's view of the remote tier: Slots is
// how many blocks it tracks, not what Redis holds. Redis's own memory is
// bounded by its maxmemory (use an allkeys-lru or allkeys-lfu policy) and
// optionally by WithTTL; Reset forgets this engine's index and deletes
// nothing (other engines may be using the blocks). Recovered is nil: a new
// Manager starts with an empty index.
//
// The client is github.com/redis/go-redis/v9, Redis's own Go client: one
// API for a server, a cluster (MOVED and ASK redirects followed, so slot
// migrations are transparent), sentinel and ring, connection pools with
// per-call deadlines, and the widest use. rueidis (also Redis's) pipelines
// concurrent calls automatically, which would help here; it was not chosen
// because go-redis's cluster support, deadlines and error surface are the
// better known, and the Manager's copy workers already overlap calls.
//
// # Pipelining
//
// WriteSlot and ReadSlot move one block per round trip. WriteSlots and
// ReadSlots (tier.BatchStorage) move the blocks of one job in pipelines of
// up to WithPipeline blocks each: one round trip per pipeline on a server;
// on a cluster, go-redis splits a pipeline by node and sends the parts at
// once. A Manager calls them for its jobs of more than one block.
package redis

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"github.com/locus-go/locus/pool"
	"github.com/locus-go/locus/tier"
	"github.com/locus-go/locus/tier/internal/blockhdr"
)

// Medium is the medium a Tier reports on its events unless WithMedium says
// otherwise: llm-d's name for a tier shared by the pods of a fleet.
// Configure its weight in the router (an unknown medium scores as GPU).
const Medium tier.Medium = "SHARED_STORAGE"

// Defaults.
const (
	// DefaultTimeout bounds every call to the server.
	DefaultTimeout = 500 * time.Millisecond
	// DefaultPipeline is how many blocks one pipelined round trip of
	// WriteSlots or ReadSlots carries at most.
	DefaultPipeline = 64
	// maxBlockSize bounds a block: Redis's largest value is 512 MiB.
	maxBlockSize = 512<<20 - HeaderSize
	// maxPipeline bounds WithPipeline.
	maxPipeline = 1 << 16
)

// Errors of a Tier, besides tier.ErrCorrupt, pool.ErrInvalidConfig,
// pool.ErrInvalidArgument and pool.ErrClosed. Match them with errors.Is.
var (
	// ErrGone: the server does not hold the block (evicted, expired, lost
	// in a restart). It also matches tier.ErrCorrupt: the Manager drops
	// the block.
	ErrGone = errors.New("redis: block gone")
	// ErrUnavailable: the call failed or timed out (the server is down,
	// stalled, or unreachable). The block is not served.
	ErrUnavailable = errors.New("redis: server unavailable")
)

// Option configures a Tier.
type Option interface{ apply(*config) }

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

type config struct {
	timeout  time.Duration
	ttl      time.Duration
	medium   tier.Medium
	cluster  bool
	poolSize int
	pipeline int
}

// WithTimeout bounds every call (default DefaultTimeout): a call that has
// not returned by then fails with ErrUnavailable. Choose it below the time
// recomputing a block would take.
func WithTimeout(d time.Duration) Option { return optionFunc(func(c *config) { c.timeout = d }) }

// WithTTL makes Redis expire every block this long after it was stored
// (default 0: no expiry; Redis's maxmemory policy evicts).
func WithTTL(d time.Duration) Option { return optionFunc(func(c *config) { c.ttl = d }) }

// WithMedium sets the medium on the Manager's events (default Medium).
func WithMedium(m tier.Medium) Option { return optionFunc(func(c *config) { c.medium = m }) }

// WithCluster makes Dial connect to a Redis Cluster through the given
// seed nodes (any of its masters); without it Dial connects to one server.
func WithCluster() Option { return optionFunc(func(c *config) { c.cluster = true }) }

// WithPipeline bounds the blocks one pipelined round trip of WriteSlots or
// ReadSlots carries (default DefaultPipeline); a larger batch is sent as
// several pipelines, one after the other, each bounded by WithTimeout.
// Lower it when WithTimeout is short for n blocks on your network (a
// 64-block pipeline of 64 KiB blocks is 4 MiB); raising it past the jobs'
// sizes changes nothing.
//
// 1 turns pipelining off: WriteSlots and ReadSlots make one call per
// block, as WriteSlot and ReadSlot do. Use it for a Redis on the engine's
// own host: over loopback a round trip costs less than Redis's buffering
// of a pipeline's replies, and pipelined loads of 64 KiB blocks measured
// about 30% slower than single calls; across a network, where every round
// trip costs its latency, pipelines win (see the package's benchmarks).
func WithPipeline(n int) Option { return optionFunc(func(c *config) { c.pipeline = n }) }

// WithPoolSize sets the connections per server of a client Dial makes
// (default: go-redis's, 10 per CPU). Match it to the Manager's copy
// workers.
func WithPoolSize(n int) Option { return optionFunc(func(c *config) { c.poolSize = n }) }

// Stats counts a Tier's calls and what went wrong with them.
type Stats struct {
	// Writes and Reads count the blocks written and served.
	Writes, Reads uint64
	// Foreign counts the reads served from a value another writer (engine)
	// stored: the fleet sharing blocks.
	Foreign uint64
	// Gone counts reads of a key the server no longer held.
	Gone uint64
	// Corrupt counts values refused: another key, a stale generation, a
	// torn or corrupt value.
	Corrupt uint64
	// Timeouts counts blocks whose call ran out of time; Errors blocks
	// whose call failed otherwise (refused connections, server errors,
	// OOM refusals). Both are ErrUnavailable. A pipelined round trip that
	// fails counts each of its blocks.
	Timeouts, Errors uint64
	// OOM counts writes the server refused at its maxmemory (counted in
	// Errors too): its policy is noeviction, or nothing is evictable.
	// Configure allkeys-lru or allkeys-lfu on a server holding a tier.
	OOM uint64
	// Pipelines counts the pipelined round trips of WriteSlots and
	// ReadSlots.
	Pipelines uint64
	// Redirects counts the MOVED and ASK answers of a cluster that the
	// client followed (a slot migrating or moved between masters). Counted
	// for a client Dial made; 0 for one given to New.
	Redirects uint64
}

// Tier is a tier.Storage on Redis. Make it with Dial or New and give it to
// tier.New. WriteSlot and ReadSlot may run on several goroutines at once;
// Stats may be called from any goroutine. The zero Tier is not usable.
type Tier struct {
	c       goredis.UniversalClient
	own     bool // Close closes c
	ns      string
	bs      int
	slots   int
	cfg     config
	writer  uint64
	bufs    sync.Pool
	closed  atomic.Bool
	writes  atomic.Uint64
	reads   atomic.Uint64
	foreign atomic.Uint64
	gone    atomic.Uint64
	corrupt atomic.Uint64
	timeout atomic.Uint64
	errs    atomic.Uint64
	oom     atomic.Uint64
	pipes   atomic.Uint64
	redirs  atomic.Uint64
}

var _ tier.Storage = (*Tier)(nil)

// Dial returns a Tier on the server at addrs[0] ("host:port"), or on the
// cluster the addrs seed (WithCluster), with a client of its own whose
// dial, read, write and pool waits are bounded by WithTimeout and which
// does not retry (the Manager drops what fails). It does not contact the
// server: a Tier made while Redis is down works once it is up. It fails
// with an error wrapping pool.ErrInvalidConfig for bad arguments.
func Dial(addrs []string, namespace string, blockSize, slots int, opts ...Option) (*Tier, error) {
	cfg, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	if len(addrs) == 0 {
		return nil, fmt.Errorf("%w: redis: no address", pool.ErrInvalidConfig)
	}
	for _, a := range addrs {
		if _, _, err := net.SplitHostPort(a); err != nil {
			return nil, fmt.Errorf("%w: redis: address %q: %v", pool.ErrInvalidConfig, a, err)
		}
	}
	if err := check(namespace, blockSize, slots); err != nil {
		return nil, err
	}
	noMaint := &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
	var c goredis.UniversalClient
	if cfg.cluster {
		c = goredis.NewClusterClient(&goredis.ClusterOptions{
			Addrs: addrs, DialTimeout: cfg.timeout, ReadTimeout: cfg.timeout, WriteTimeout: cfg.timeout,
			PoolTimeout: cfg.timeout, ContextTimeoutEnabled: true, MaxRetries: -1, PoolSize: cfg.poolSize,
			DisableIdentity: true, MaintNotificationsConfig: noMaint,
		})
	} else {
		c = goredis.NewClient(&goredis.Options{
			Addr: addrs[0], DialTimeout: cfg.timeout, ReadTimeout: cfg.timeout, WriteTimeout: cfg.timeout,
			PoolTimeout: cfg.timeout, ContextTimeoutEnabled: true, MaxRetries: -1, PoolSize: cfg.poolSize,
			DisableIdentity: true, MaintNotificationsConfig: noMaint,
		})
	}
	t := newTier(c, namespace, blockSize, slots, cfg)
	t.own = true
	if cc, ok := c.(*goredis.ClusterClient); ok {
		// Before any command: the hook is on every node client made.
		cc.OnNewNode(func(n *goredis.Client) { n.AddHook(redirectHook{&t.redirs}) })
	}
	return t, nil
}

// New returns a Tier over a client the caller made (a *goredis.Client,
// *goredis.ClusterClient, a failover or ring client) and keeps: Close does
// not close it. Give the client timeouts; every call is also bounded by
// WithTimeout. It fails with an error wrapping pool.ErrInvalidConfig for
// a nil client or bad arguments.
func New(c goredis.UniversalClient, namespace string, blockSize, slots int, opts ...Option) (*Tier, error) {
	cfg, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	if c == nil {
		return nil, fmt.Errorf("%w: redis: nil client", pool.ErrInvalidConfig)
	}
	if err := check(namespace, blockSize, slots); err != nil {
		return nil, err
	}
	return newTier(c, namespace, blockSize, slots, cfg), nil
}

func newConfig(opts []Option) (config, error) {
	cfg := config{timeout: DefaultTimeout, medium: Medium, pipeline: DefaultPipeline}
	for _, o := range opts {
		if o == nil {
			return cfg, fmt.Errorf("%w: redis: nil option", pool.ErrInvalidConfig)
		}
		o.apply(&cfg)
	}
	switch {
	case cfg.timeout <= 0:
		return cfg, fmt.Errorf("%w: redis: timeout %v", pool.ErrInvalidConfig, cfg.timeout)
	case cfg.ttl < 0 || (cfg.ttl > 0 && cfg.ttl < time.Millisecond):
		return cfg, fmt.Errorf("%w: redis: TTL %v (0, or at least 1ms)", pool.ErrInvalidConfig, cfg.ttl)
	case cfg.medium == "":
		return cfg, fmt.Errorf("%w: redis: empty medium", pool.ErrInvalidConfig)
	case cfg.poolSize < 0:
		return cfg, fmt.Errorf("%w: redis: pool size %d", pool.ErrInvalidConfig, cfg.poolSize)
	case cfg.pipeline < 1 || cfg.pipeline > maxPipeline:
		return cfg, fmt.Errorf("%w: redis: pipeline of %d blocks; want 1 to %d", pool.ErrInvalidConfig, cfg.pipeline, maxPipeline)
	}
	return cfg, nil
}

func check(namespace string, blockSize, slots int) error {
	switch {
	case namespace == "":
		return fmt.Errorf("%w: redis: empty namespace (name the model and KV layout)", pool.ErrInvalidConfig)
	case strings.ContainsAny(namespace, "{}"):
		// A hash tag would put every block in one cluster slot.
		return fmt.Errorf("%w: redis: namespace %q has a brace (a cluster hash tag would put every block on one master)", pool.ErrInvalidConfig, namespace)
	case blockSize <= 0 || blockSize > maxBlockSize:
		return fmt.Errorf("%w: redis: block size %d; want 1 to %d", pool.ErrInvalidConfig, blockSize, maxBlockSize)
	case slots <= 0 || slots > pool.MaxBlocks:
		return fmt.Errorf("%w: redis: %d slots; want 1 to %d", pool.ErrInvalidConfig, slots, pool.MaxBlocks)
	}
	return nil
}

func newTier(c goredis.UniversalClient, namespace string, blockSize, slots int, cfg config) *Tier {
	var w [8]byte
	for binary.LittleEndian.Uint64(w[:]) == 0 {
		_, _ = rand.Read(w[:])
	}
	t := &Tier{c: c, ns: namespace, bs: blockSize, slots: slots, cfg: cfg, writer: binary.LittleEndian.Uint64(w[:])}
	t.bufs.New = func() any { b := make([]byte, HeaderSize+blockSize); return &b }
	return t
}

// Key returns the Redis key of block k.
func (t *Tier) Key(k tier.Key) string {
	if t == nil {
		return ""
	}
	b := make([]byte, 0, len(t.ns)+2+2*tier.KeyHashSize+10)
	b = append(b, t.ns...)
	b = append(b, ':')
	b = hex.AppendEncode(b, k.Hash[:])
	b = append(b, ':')
	b = strconv.AppendUint(b, uint64(k.Group), 10)
	return string(b)
}

// Medium returns the medium on the Manager's events (WithMedium).
func (t *Tier) Medium() tier.Medium {
	if t == nil {
		return ""
	}
	return t.cfg.medium
}

// BlockSize returns the size of a block, in bytes.
func (t *Tier) BlockSize() int {
	if t == nil {
		return 0
	}
	return t.bs
}

// Slots returns how many blocks this engine's index tracks.
func (t *Tier) Slots() int {
	if t == nil {
		return 0
	}
	return t.slots
}

// Namespace returns the namespace of the keys.
func (t *Tier) Namespace() string {
	if t == nil {
		return ""
	}
	return t.ns
}

// Client returns the Redis client, for an operator's own commands.
func (t *Tier) Client() goredis.UniversalClient {
	if t == nil {
		return nil
	}
	return t.c
}

// Stats returns the counts. Any goroutine may call it.
func (t *Tier) Stats() Stats {
	if t == nil {
		return Stats{}
	}
	return Stats{
		Writes: t.writes.Load(), Reads: t.reads.Load(), Foreign: t.foreign.Load(),
		Gone: t.gone.Load(), Corrupt: t.corrupt.Load(), Timeouts: t.timeout.Load(), Errors: t.errs.Load(),
		OOM: t.oom.Load(), Pipelines: t.pipes.Load(), Redirects: t.redirs.Load(),
	}
}

// Ping asks the server (every master of a cluster) whether it answers,
// within the timeout.
func (t *Tier) Ping() error {
	if t == nil || t.c == nil || t.closed.Load() {
		return pool.ErrClosed
	}
	ctx, cancel := context.WithTimeout(context.Background(), t.cfg.timeout)
	defer cancel()
	var err error
	if cc, ok := t.c.(*goredis.ClusterClient); ok {
		err = cc.ForEachMaster(ctx, func(ctx context.Context, c *goredis.Client) error { return c.Ping(ctx).Err() })
	} else {
		err = t.c.Ping(ctx).Err()
	}
	return t.fail(err)
}

// fail classifies a call's error, counts it, and wraps it in
// ErrUnavailable.
func (t *Tier) fail(err error) error {
	if err == nil {
		return nil
	}
	var ne net.Error
	if errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout() {
		t.timeout.Add(1)
	} else {
		t.errs.Add(1)
		if strings.HasPrefix(err.Error(), "OOM ") {
			t.oom.Add(1)
		}
	}
	return fmt.Errorf("%w: %w", ErrUnavailable, err)
}

func (t *Tier) check(slot int, b []byte) error {
	switch {
	case t == nil || t.c == nil || t.closed.Load():
		return pool.ErrClosed
	}
	return tier.CheckSlot("redis", slot, t.slots, t.bs, b)
}

// WriteSlot stores block src of key k, stamped with generation gen, in one
// SET (with WithTTL's expiry). The slot names nothing in Redis: the key
// does.
func (t *Tier) WriteSlot(slot int, k tier.Key, gen uint64, src []byte) error {
	if err := t.check(slot, src); err != nil {
		return err
	}
	if gen == 0 {
		return fmt.Errorf("%w: redis: generation 0", pool.ErrInvalidArgument)
	}
	bp := t.bufs.Get().(*[]byte)
	defer t.bufs.Put(bp)
	v := t.value(*bp, k, gen, src)
	ctx, cancel := context.WithTimeout(context.Background(), t.cfg.timeout)
	defer cancel()
	if err := t.c.Set(ctx, t.Key(k), v, t.cfg.ttl).Err(); err != nil {
		return t.fail(err)
	}
	t.writes.Add(1)
	return nil
}

// value encodes block src of key k, generation gen, into v (HeaderSize +
// BlockSize bytes) and returns v.
func (t *Tier) value(v []byte, k tier.Key, gen uint64, src []byte) []byte {
	h := blockhdr.Header{Writer: t.writer, Gen: gen, Key: k, Length: uint32(t.bs), Sum: blockhdr.Checksum(src)}
	h.Put(v, magic)
	copy(v[HeaderSize:], src)
	return v
}

// ReadSlot reads the block of key k into dst, if the server holds it
// intact: ErrGone (and tier.ErrCorrupt) for a key it does not hold,
// tier.ErrCorrupt for a value that is not exactly that block or that this
// Tier wrote with another generation, ErrUnavailable when the call fails.
// On error dst holds garbage.
func (t *Tier) ReadSlot(slot int, k tier.Key, gen uint64, dst []byte) error {
	if err := t.check(slot, dst); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), t.cfg.timeout)
	defer cancel()
	v, err := t.c.Get(ctx, t.Key(k)).Bytes()
	return t.serve(k, gen, v, err, dst)
}

// serve checks what a GET of key k answered (v, err) and copies the block
// into dst if it is exactly the block of generation gen, intact; it counts
// the outcome.
func (t *Tier) serve(k tier.Key, gen uint64, v []byte, err error, dst []byte) error {
	if errors.Is(err, goredis.Nil) {
		t.gone.Add(1)
		return fmt.Errorf("%w: %w: %v", tier.ErrCorrupt, ErrGone, k)
	}
	if err != nil {
		return t.fail(err)
	}
	h, payload, err := parseValue(v)
	switch {
	case err != nil:
	case h.Key != k:
		err = fmt.Errorf("%w: holds %v, want %v", tier.ErrCorrupt, h.Key, k)
	case int(h.Length) != t.bs:
		err = fmt.Errorf("%w: block of %d bytes, want %d", tier.ErrCorrupt, h.Length, t.bs)
	case h.Writer == t.writer && h.Gen != gen:
		err = fmt.Errorf("%w: generation %d, want %d (stale)", tier.ErrCorrupt, h.Gen, gen)
	}
	if err != nil {
		t.corrupt.Add(1)
		return err
	}
	copy(dst, payload)
	t.reads.Add(1)
	if h.Writer != t.writer {
		t.foreign.Add(1)
	}
	return nil
}

// Recovered returns nothing: a new Manager starts with an empty index (the
// blocks stay in Redis for the engines that know them).
func (t *Tier) Recovered() ([]tier.Recovered, uint64) { return nil, 1 }

// Reset forgets nothing in Redis (other engines may use the blocks); this
// Tier's reads check the generation of its own writes, so no block written
// before the Reset is served for one written after.
func (t *Tier) Reset(floor uint64) error {
	if t == nil || t.c == nil || t.closed.Load() {
		return pool.ErrClosed
	}
	return nil
}

// Close closes the client if Dial made it. Later calls fail with
// pool.ErrClosed.
func (t *Tier) Close() error {
	if t == nil || t.c == nil || !t.closed.CompareAndSwap(false, true) {
		return pool.ErrClosed
	}
	if t.own {
		return t.c.Close()
	}
	return nil
}
