// Package lifo is the last-in, first-out reuse policy: a pool hands out the
// block freed most recently. It is the default because a recently written
// block is the most likely to still be in cache, so writing it again is cheap.
// A fresh pool hands out blocks 0, 1, 2, ...
package lifo

import "github.com/locus-go/locus/pool"

// Policy is the LIFO reuse policy. The zero value is ready to use.
type Policy struct{}

var _ pool.ReusePolicy = Policy{}

// Order returns pool.LIFO.
func (Policy) Order() pool.Order { return pool.LIFO }
