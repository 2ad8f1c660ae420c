package events

import (
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/locus-go/locus/pool"
)

// Encoding selects how an event is encoded inside a batch (see the package
// doc).
type Encoding uint8

const (
	// Positional encodes an event as an array whose first element is its
	// tag: vLLM's encoding while its events were array_like msgspec
	// Structs, and what every version of llm-d's indexer decodes.
	Positional Encoding = iota + 1
	// Named encodes an event as a map with its tag under "type": vLLM's
	// encoding since it dropped array_like from its events.
	Named
)

// String returns the encoding's name.
func (e Encoding) String() string {
	switch e {
	case Positional:
		return "positional"
	case Named:
		return "named"
	}
	return fmt.Sprintf("Encoding(%d)", uint8(e))
}

// HashForm selects how block hashes are sent (see the package doc).
type HashForm uint8

const (
	// Uint64Hashes sends a hash as kv.Hash.Uint64, an unsigned integer:
	// vLLM's default form.
	Uint64Hashes HashForm = iota + 1
	// ByteHashes sends a hash as its digest's bytes (kv.Hash.AppendBytes):
	// vLLM's form with VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES=0.
	ByteHashes
)

// String returns the form's name.
func (f HashForm) String() string {
	switch f {
	case Uint64Hashes:
		return "uint64"
	case ByteHashes:
		return "bytes"
	}
	return fmt.Sprintf("HashForm(%d)", uint8(f))
}

// Defaults of New.
const (
	// DefaultBatchSize is how many events a batch holds before the owner
	// hands it to the publisher's goroutine.
	DefaultBatchSize = 128
	// DefaultFlushInterval is how long a batch waits, from its first
	// event, before the publisher's goroutine flushes it unfilled.
	DefaultFlushInterval = 10 * time.Millisecond
	// DefaultBuffer is how many sealed batches may wait for the
	// publisher's goroutine before the owner drops new ones.
	DefaultBuffer = 256
	// DefaultHighWaterMark is how many messages the socket queues before
	// it discards new ones, as ZMQ's default SNDHWM.
	DefaultHighWaterMark = 1000
	// DefaultLinger is how long Close gives the socket to send what it has
	// queued when a subscriber is connected.
	DefaultLinger = 250 * time.Millisecond
	// DefaultMedium is vLLM's name of the tier the blocks live in.
	DefaultMedium = "GPU"
	// DefaultWriteTimeout is how long one write to a subscriber may block
	// before the subscriber is taken for stalled and disconnected.
	DefaultWriteTimeout = 5 * time.Second
	// DefaultReplayBuffer is how many recent batches the replay socket
	// keeps: vLLM's buffer_steps.
	DefaultReplayBuffer = 10_000
	// DialWait is how long New retries to connect, with WithDial.
	DialWait = 5 * time.Second
)

// Limits of the options, far beyond any sensible value: they keep the
// publisher's fixed buffers within memory.
const (
	maxBatchSize = 1 << 20
	maxBuffer    = 1 << 16
	maxReplay    = 1 << 24
)

// Option configures a Publisher.
type Option interface{ apply(*config) }

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

type config struct {
	topic     string
	batchSize int
	interval  time.Duration
	buffer    int
	hwm       int
	linger    time.Duration
	encoding  Encoding
	hashes    HashForm
	medium    string
	rank      int
	dial      bool

	writeTimeout time.Duration
	replay       string
	replayBuffer int

	hold    chan struct{} // tests: the publisher's goroutine waits for it before starting
	sendBuf int           // tests: the kernel send buffer of each subscriber's connection
}

func defaults() config {
	return config{
		batchSize: DefaultBatchSize,
		interval:  DefaultFlushInterval,
		buffer:    DefaultBuffer,
		hwm:       DefaultHighWaterMark,
		linger:    DefaultLinger,
		encoding:  Positional,
		hashes:    Uint64Hashes,
		medium:    DefaultMedium,

		writeTimeout: DefaultWriteTimeout,
		replayBuffer: DefaultReplayBuffer,
	}
}

// WithTopic sets the topic frame of every message (default empty, as
// vLLM's). Subscribers filter on its prefix; llm-d's indexer expects
// Topic(pod, model).
func WithTopic(topic string) Option { return optionFunc(func(c *config) { c.topic = topic }) }

// Topic returns the topic llm-d's indexer parses, "kv@<pod>@<model>". Neither
// part may contain '@' for the indexer to split it back.
func Topic(pod, model string) string { return "kv@" + pod + "@" + model }

// WithBatchSize sets how many events a batch holds before it is handed to
// the publisher's goroutine (default DefaultBatchSize). A batch is also
// flushed after the flush interval, by Flush and by Close.
func WithBatchSize(n int) Option { return optionFunc(func(c *config) { c.batchSize = n }) }

// WithFlushInterval sets how long a batch waits, from its first event,
// before it is published unfilled (default DefaultFlushInterval).
func WithFlushInterval(d time.Duration) Option {
	return optionFunc(func(c *config) { c.interval = d })
}

// WithBuffer sets how many sealed batches may wait for the publisher's
// goroutine (default DefaultBuffer); the owner drops a batch that finds
// them all waiting. The publisher keeps that many batches and three more.
func WithBuffer(batches int) Option { return optionFunc(func(c *config) { c.buffer = batches }) }

// WithHighWaterMark sets how many messages the socket queues for each
// subscriber before it drops new ones for that subscriber, and for that
// subscriber only (default DefaultHighWaterMark, as ZMQ's SNDHWM, which is
// also per subscriber; 0 lets the queues grow without bound: a stalled
// subscriber then holds memory until WithWriteTimeout disconnects it).
func WithHighWaterMark(messages int) Option { return optionFunc(func(c *config) { c.hwm = messages }) }

// WithLinger sets how long Close gives the subscribers' writers to write
// what is queued for them (default DefaultLinger); what is still queued then
// is discarded and counted (Stats.Undelivered), as with ZMQ_LINGER.
func WithLinger(d time.Duration) Option { return optionFunc(func(c *config) { c.linger = d }) }

// WithWriteTimeout sets how long one write to a subscriber may block
// (default DefaultWriteTimeout): a subscriber whose connection accepts
// nothing for that long is disconnected and what was queued for it counted
// as undelivered; a ZMQ subscriber reconnects by itself and sees the gap in
// the sequence numbers. It bounds the replay socket's writes too.
func WithWriteTimeout(d time.Duration) Option {
	return optionFunc(func(c *config) { c.writeTimeout = d })
}

// WithReplay opens vLLM's replay socket on endpoint (a ROUTER, such as
// "tcp://*:5558"): it keeps the most recent published batches
// (WithReplayBuffer) and sends a subscriber that found a gap in the
// sequence numbers the batches from the one it asks for (see the package
// doc). Without it (the default, as vLLM's replay_endpoint) there is none.
func WithReplay(endpoint string) Option { return optionFunc(func(c *config) { c.replay = endpoint }) }

// WithReplayBuffer sets how many recent batches the replay socket keeps
// (default DefaultReplayBuffer, vLLM's buffer_steps). They are kept
// encoded: the memory is the batches' payloads.
func WithReplayBuffer(batches int) Option {
	return optionFunc(func(c *config) { c.replayBuffer = batches })
}

// WithEncoding sets the encoding of events (default Positional).
func WithEncoding(e Encoding) Option { return optionFunc(func(c *config) { c.encoding = e }) }

// WithHashes sets the form of block hashes (default Uint64Hashes).
func WithHashes(f HashForm) Option { return optionFunc(func(c *config) { c.hashes = f }) }

// WithMedium sets the medium field of the hot pool's events, those whose
// kv.Event.Medium is empty (default DefaultMedium); an empty medium is
// sent as nil. An event of a tier (a kv.Manager WithTiers) carries its own
// medium, such as "CPU", which is sent instead.
func WithMedium(medium string) Option { return optionFunc(func(c *config) { c.medium = medium }) }

// WithDataParallelRank sets the data-parallel rank every batch carries
// (default 0): an engine that runs several managers, one per data-parallel
// rank, gives each publisher its rank, as vLLM does.
func WithDataParallelRank(rank int) Option { return optionFunc(func(c *config) { c.rank = rank }) }

// WithDial makes the publisher connect to the endpoint, where a subscriber
// listens, instead of listening on it (the default).
func WithDial() Option { return optionFunc(func(c *config) { c.dial = true }) }

// maxTopic bounds a topic or medium: text a router parses, not a payload.
const maxTopic = 1024

func (c *config) validate() error {
	switch {
	case !utf8.ValidString(c.topic) || len(c.topic) > maxTopic:
		return fmt.Errorf("events: %w: topic %q: want valid UTF-8 of at most %d bytes (routers parse it as text)", pool.ErrInvalidConfig, c.topic, maxTopic)
	case !utf8.ValidString(c.medium) || len(c.medium) > maxTopic:
		return fmt.Errorf("events: %w: medium %q: want valid UTF-8 of at most %d bytes", pool.ErrInvalidConfig, c.medium, maxTopic)
	case c.batchSize <= 0 || c.batchSize > maxBatchSize:
		return fmt.Errorf("events: %w: batch size %d; want 1 to %d", pool.ErrInvalidConfig, c.batchSize, maxBatchSize)
	case c.interval <= 0:
		return fmt.Errorf("events: %w: flush interval %v", pool.ErrInvalidConfig, c.interval)
	case c.buffer <= 0 || c.buffer > maxBuffer:
		return fmt.Errorf("events: %w: buffer of %d batches; want 1 to %d", pool.ErrInvalidConfig, c.buffer, maxBuffer)
	case c.hwm < 0:
		return fmt.Errorf("events: %w: high-water mark %d", pool.ErrInvalidConfig, c.hwm)
	case c.linger < 0:
		return fmt.Errorf("events: %w: linger %v", pool.ErrInvalidConfig, c.linger)
	case c.writeTimeout <= 0:
		return fmt.Errorf("events: %w: write timeout %v", pool.ErrInvalidConfig, c.writeTimeout)
	case c.replayBuffer <= 0 || c.replayBuffer > maxReplay:
		return fmt.Errorf("events: %w: replay buffer of %d batches; want 1 to %d", pool.ErrInvalidConfig, c.replayBuffer, maxReplay)
	case c.encoding != Positional && c.encoding != Named:
		return fmt.Errorf("events: %w: %v", pool.ErrInvalidConfig, c.encoding)
	case c.hashes != Uint64Hashes && c.hashes != ByteHashes:
		return fmt.Errorf("events: %w: %v", pool.ErrInvalidConfig, c.hashes)
	case c.rank < 0:
		return fmt.Errorf("events: %w: data-parallel rank %d", pool.ErrInvalidConfig, c.rank)
	}
	return nil
}
