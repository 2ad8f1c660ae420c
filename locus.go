package locus

import (
	"fmt"

	"github.com/locus-go/locus/backing/mmap"
	"github.com/locus-go/locus/policy/lifo"
	"github.com/locus-go/locus/pool"
	"github.com/locus-go/locus/transport/mailbox"
)

// Defaults of Default.
const (
	// DefaultBlockSize is 4 KiB, the base page size of most systems. Set
	// your KV-cache block's size with WithBlockSize.
	DefaultBlockSize = 4096
	// DefaultBlocks is 1024 blocks: 4 MiB at the default block size.
	DefaultBlocks = 1024
)

// DefaultPool is the type of the shipped design: one region of blocks in
// huge pages where the system offers them, per-producer chunk mailboxes,
// LIFO reuse.
type DefaultPool = pool.Pool[*mmap.Backing, *mailbox.Transport, lifo.Policy]

// Option configures a preset.
type Option interface{ apply(*config) }

type config struct {
	blockSize int
	blocks    int
}

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

// WithBlockSize sets the size of every block in bytes (default DefaultBlockSize).
func WithBlockSize(n int) Option { return optionFunc(func(c *config) { c.blockSize = n }) }

// WithBlocks sets the number of blocks (default DefaultBlocks).
func WithBlocks(n int) Option { return optionFunc(func(c *config) { c.blocks = n }) }

// Default returns the shipped design: a pool of zeroed blocks in one region
// whose workers free through per-producer chunk mailboxes
// (transport/mailbox), reused last-in first-out (policy/lifo). Invalid sizes
// fail with an error wrapping pool.ErrInvalidConfig.
//
// The region is an anonymous mapping advised into transparent huge pages
// (backing/mmap with WithHugePages and WithFallback) when it spans at least
// two of them: drained blocks come back colder than a free list's, and
// huge pages spare their TLB misses. Where the system offers no mapping or
// no huge pages, and in race-detector builds (which do not see mapped
// memory), the region is Go heap memory instead; Backing().Mapped and
// HugePages tell which. Either way a block slice must not be used after
// Close: a mapping is unmapped then, and touching it kills the process.
func Default(opts ...Option) (*DefaultPool, error) {
	cfg := config{blockSize: DefaultBlockSize, blocks: DefaultBlocks}
	for _, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("locus: %w: nil option", pool.ErrInvalidConfig)
		}
		o.apply(&cfg)
	}
	b, err := mmap.New(cfg.blockSize, cfg.blocks, mmap.WithHugePages(), mmap.WithFallback())
	if err != nil {
		return nil, fmt.Errorf("locus: %w", err)
	}
	return pool.New(b, mailbox.New(), lifo.Policy{})
}
