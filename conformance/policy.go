package conformance

import (
	"context"
	"testing"

	"github.com/locus-go/locus/backing/heap"
	"github.com/locus-go/locus/pool"
	"github.com/locus-go/locus/transport/mailbox"
)

// TestPolicy runs the policy suite: Order returns a valid order, the same on
// every call, and a pool built with the policy hands blocks out in that
// order. newP is called once per case.
func TestPolicy(t *testing.T, newP func(t *testing.T) pool.ReusePolicy) {
	t.Helper()
	policySuite().runT(t, newP)
}

// CheckPolicy runs the policy suite outside go test and returns every
// violation found.
func CheckPolicy(newP func() (pool.ReusePolicy, error)) error {
	return policySuite().runCheck(newP)
}

func policySuite() suite[pool.ReusePolicy] {
	return suite[pool.ReusePolicy]{
		cases:   policyCases,
		abort:   func(pool.ReusePolicy) {},
		release: func(pool.ReusePolicy) {},
	}
}

var policyCases = []testCase[pool.ReusePolicy]{
	{
		name:        "ValidOrder",
		explanation: "Order returns pool.LIFO or pool.FIFO",
		run: func(ctx context.Context, p pool.ReusePolicy) error {
			if o := p.Order(); !o.Valid() {
				return violationf(ErrContract, "Order() = %v", o)
			}
			return nil
		},
	},
	{
		name:        "StableOrder",
		explanation: "Order returns the same value on every call: the pool reads it once",
		run: func(ctx context.Context, p pool.ReusePolicy) error {
			first := p.Order()
			for i := range 100 {
				if o := p.Order(); o != first {
					return violationf(ErrOrder, "call %d returned %v, the first %v", i+2, o, first)
				}
			}
			return nil
		},
	},
	{
		name:        "PoolFollowsOrder",
		explanation: "a pool built with the policy reuses blocks in the policy's order",
		run: func(ctx context.Context, p pool.ReusePolicy) error {
			b, err := heap.New(64, 8)
			if err != nil {
				return err
			}
			pl, err := pool.New(b, mailbox.New(), p)
			if err != nil {
				return violationf(ErrContract, "pool.New: %v", err)
			}
			defer pl.Close()
			return checkOrder(ctx, poolSubject[*heap.Backing, *mailbox.Transport, pool.ReusePolicy]{pl})
		},
	},
}
