// Package fifo is the first-in, first-out reuse policy: a pool hands out the
// block that has been free longest. It spreads reuse over every block (a
// freed block is reused only after all others), which makes a use after free
// more likely to read poisoned or unrelated data than the same request's data,
// at the cost of cache warmth: the block it hands out is the one least likely
// to still be in cache. Choose it for that spread; policy/lifo is faster. A
// fresh pool hands out blocks n-1, n-2, ...
package fifo

import "github.com/locus-go/locus/pool"

// Policy is the FIFO reuse policy. The zero value is ready to use.
type Policy struct{}

var _ pool.ReusePolicy = Policy{}

// Order returns pool.FIFO.
func (Policy) Order() pool.Order { return pool.FIFO }
