package kv

import (
	"fmt"

	"github.com/locus-go/locus/internal/typednil"
	"github.com/locus-go/locus/pool"
)

// Allocator hands out blocks all or nothing; *pool.Pool is one.
type Allocator interface {
	AllocChunk(dst []pool.Handle) error
	// Capacity is the most blocks the allocator could ever hand out at
	// once; a Table asks for no more.
	Capacity() int
}

// ChunkFreer frees a chunk of blocks; *pool.Pool (locally, on the owner) and
// *pool.Sender (remotely, from a worker) are both one.
type ChunkFreer interface {
	FreeChunk(chunk []pool.Handle) error
}

// Table is one sequence's block table: the blocks that hold its tokens,
// tokensPerBlock tokens to a block. Appending tokens allocates exactly the
// blocks the new length needs, all or nothing; Release returns every block
// as one chunk.
//
// A Table shares nothing: use it for an engine without prefix caching, where
// every request owns its blocks. Sequences that share blocks (a common
// system prompt, forks) need a Manager.
//
// A Table is used by one goroutine at a time: typically the owner appends
// while the sequence runs, and a worker releases it when the request is done.
// Its zero value is not usable (Append fails with pool.ErrInvalidArgument); build
// one with NewTable.
type Table struct {
	tokensPerBlock int
	tokens         int
	handles        []pool.Handle
}

// NewTable returns an empty table of tokensPerBlock tokens per block. It
// fails with an error wrapping pool.ErrInvalidArgument if tokensPerBlock is not
// positive.
func NewTable(tokensPerBlock int) (*Table, error) {
	if tokensPerBlock <= 0 {
		return nil, fmt.Errorf("kv: %w: %d tokens per block", pool.ErrInvalidArgument, tokensPerBlock)
	}
	return &Table{tokensPerBlock: tokensPerBlock}, nil
}

// Tokens returns the sequence's length in tokens.
func (t *Table) Tokens() int {
	if t == nil {
		return 0
	}
	return t.tokens
}

// TokensPerBlock returns how many tokens a block holds.
func (t *Table) TokensPerBlock() int {
	if t == nil {
		return 0
	}
	return t.tokensPerBlock
}

// Handles returns the sequence's blocks in token order. The slice is the
// table's own: read it, do not keep or change it.
func (t *Table) Handles() []pool.Handle {
	if t == nil {
		return nil
	}
	return t.handles
}

// Append grows the sequence by tokens tokens, allocating from a the blocks the
// new length needs. If a cannot provide them all it allocates none, leaves the
// table as it was and returns a's error (pool.ErrExhausted, say); a request for
// more blocks than a's capacity fails with pool.ErrExhausted before anything is
// reserved. A negative count, or one that would overflow the length, fails
// with pool.ErrInvalidArgument, and so does a nil or typed-nil allocator or a
// zero or nil Table.
func (t *Table) Append(a Allocator, tokens int) error {
	if t == nil || t.tokensPerBlock <= 0 {
		return fmt.Errorf("kv: %w: zero or nil Table; make it with NewTable", pool.ErrInvalidArgument)
	}
	if typednil.Is(a) {
		return fmt.Errorf("kv: %w: nil allocator", pool.ErrInvalidArgument)
	}
	if tokens < 0 || tokens > int(^uint(0)>>1)-t.tokens {
		return fmt.Errorf("kv: %w: append %d tokens to %d", pool.ErrInvalidArgument, tokens, t.tokens)
	}
	n := t.tokens + tokens
	blocks := n/t.tokensPerBlock + min(n%t.tokensPerBlock, 1) // no overflow near MaxInt
	need := blocks - len(t.handles)
	if need > 0 && blocks > a.Capacity() {
		// As AllocChunk would say, without reserving the handles first; a
		// closed pool has no capacity, and says so itself.
		if err := a.AllocChunk(nil); err != nil {
			return err
		}
		return pool.ErrExhausted
	}
	if need > 0 {
		old := len(t.handles)
		t.handles = grow(t.handles, need)
		if err := a.AllocChunk(t.handles[old:]); err != nil {
			clear(t.handles[old:])
			t.handles = t.handles[:old]
			return err
		}
	}
	t.tokens = n
	return nil
}

// Release frees every block of the table as one chunk through f (the pool
// itself, or a worker's Sender) and empties the table, keeping its capacity
// for reuse. The table is empty afterwards even if f reports an error: the
// blocks are no longer the table's either way. A nil or typed-nil f fails
// with pool.ErrInvalidArgument and changes nothing; a nil Table has nothing to
// release.
func (t *Table) Release(f ChunkFreer) error {
	if t == nil {
		return nil
	}
	if typednil.Is(f) {
		return fmt.Errorf("kv: %w: nil freer", pool.ErrInvalidArgument)
	}
	err := f.FreeChunk(t.handles)
	clear(t.handles)
	t.handles = t.handles[:0]
	t.tokens = 0
	return err
}

func grow(s []pool.Handle, n int) []pool.Handle {
	if len(s)+n <= cap(s) {
		return s[:len(s)+n]
	}
	g := make([]pool.Handle, len(s)+n, 2*cap(s)+n)
	copy(g, s)
	return g
}
