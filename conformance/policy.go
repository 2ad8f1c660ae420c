package conformance

import (
	"testing"

	"github.com/locus-go/locus/backing/heap"
	"github.com/locus-go/locus/pool"
	"github.com/locus-go/locus/transport/mailbox"
)

// TestPolicy runs the policy suite: Order returns a valid order, the same
// one on every one of a million calls, in every instance, also after a
// pool built with it has worked; and that pool reuses blocks in that
// order. newP is called once
// per case, more often where a case needs several instances.
func TestPolicy(t *testing.T, newP func(t *testing.T) pool.ReusePolicy) {
	t.Helper()
	policySuite().runT(t, newP)
}

// CheckPolicy runs the policy suite outside go test (it calls no testing
// function) and returns every violation found, joined with errors.Join.
func CheckPolicy(newP func() (pool.ReusePolicy, error)) error {
	return policySuite().runCheck(newP)
}

func policySuite() suite[pool.ReusePolicy] {
	nothing := func(pool.ReusePolicy) {}
	return suite[pool.ReusePolicy]{cases: policyCases, abort: nothing, release: nothing}
}

type poRun = run[pool.ReusePolicy]

var policyCases = []testCase[pool.ReusePolicy]{
	{
		name:        "StableOrder",
		explanation: "Order returns the same value on every call (the pool reads it once), in every instance, a million calls each",
		run: func(r *poRun) error {
			policies, err := instances(r, 3, func(p pool.ReusePolicy) (pool.ReusePolicy, error) { return p, nil })
			must(err)
			for k, p := range policies {
				first := p.Order()
				for i := range orderCalls {
					if o := p.Order(); o != first {
						return violationf(ErrOrder, "instance %d: Order() call %d returned %v, the first %v", k, i+2, o, first)
					}
				}
			}
			return nil
		},
	},
	{
		name:        "ValidOrder",
		explanation: "Order returns pool.LIFO or pool.FIFO, on every call",
		run: func(r *poRun) error {
			for i := range everyTime {
				if o := r.x.Order(); !o.Valid() {
					return violationf(ErrContract, "Order() call %d = %v", i+1, o)
				}
			}
			return nil
		},
	},
	{
		name:        "PoolFollowsOrder",
		explanation: "a pool built with the policy reuses blocks in the policy's order, over thousands of local and remote frees",
		run: func(r *poRun) error {
			b, err := heap.New(64, 64)
			must(err)
			pl, err := pool.New(b, mailbox.New(), r.x)
			mustOK("pool.New", err)
			defer pl.Close()
			reuseOrder(r.ctx, poolSubject[*heap.Backing, *mailbox.Transport, pool.ReusePolicy]{pl})
			// After the pool's work, the policy still declares the order
			// the pool read at New.
			got, read := r.x.Order(), pl.Stats().Order
			require(got == read, ErrOrder, "after thousands of allocations the policy's Order() = %v; the pool read %v at New", got, read)
			return nil
		},
	},
}

// orderCalls is how many times StableOrder calls Order on each instance:
// ten times everyTime, so that a policy whose order flips late, after the
// calls a case of another suite makes, flips here. A call is a few
// nanoseconds: a million of them take milliseconds.
const orderCalls = 10 * everyTime
