package conformance

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/locus-go/locus/backing/heap"
	"github.com/locus-go/locus/internal/race"
	"github.com/locus-go/locus/pool"
	"github.com/locus-go/locus/transport/mailbox"
)

// Testing the tester: every deliberately broken component must be rejected
// by exactly the cases listed for it, each with the kind of violation
// listed, and every other case must pass (or skip).

// kinds are the violation kinds, in the order kindOf tries them.
var kinds = []error{ErrLost, ErrDuplicated, ErrAliased, ErrCorrupted, ErrOrder, ErrAccounting, ErrContract, ErrAllocs, ErrRetained, ErrDeadlock}

// kindOf returns the kind a violation wraps.
func kindOf(err error) error {
	for _, k := range kinds {
		if errors.Is(err, k) {
			return k
		}
	}
	return nil
}

// found is what a suite run found: case name -> kind of its violation.
type found map[string]error

func (f found) String() string {
	var b strings.Builder
	b.WriteString("found{")
	for i, name := range slices.Sorted(maps.Keys(f)) {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%q: %s", name, kindName(f[name]))
	}
	b.WriteString("}")
	return b.String()
}

var kindNames = map[error]string{
	ErrLost: "ErrLost", ErrDuplicated: "ErrDuplicated", ErrAliased: "ErrAliased", ErrCorrupted: "ErrCorrupted",
	ErrOrder: "ErrOrder", ErrAccounting: "ErrAccounting", ErrContract: "ErrContract", ErrAllocs: "ErrAllocs",
	ErrRetained: "ErrRetained", ErrDeadlock: "ErrDeadlock",
}

func kindName(k error) string {
	if n, ok := kindNames[k]; ok {
		return n
	}
	return fmt.Sprint(k)
}

type brokenComponent struct {
	name string
	// run runs a suite over the component; it is called in a
	// testing/synctest bubble and returns the outcomes and a function that
	// lets go whatever the component left blocked forever.
	run  func() ([]outcome, func())
	want found
	// maybe are cases that catch the component only when the scheduler
	// lets them (a producer happens to be blocked when Close comes); when
	// they do, it must be with the kind given (any kind, for nil: a pool
	// broken everywhere fails the concurrent cases in ways that depend on
	// which blocks the workers hold).
	maybe found
	// onlyWithoutRace says why the component cannot be checked under the
	// race detector, if it cannot.
	onlyWithoutRace string
}

func transports(ctor func() (pool.Transport, error), free func()) func() ([]outcome, func()) {
	return func() ([]outcome, func()) { return transportSuite().run(ctor, "broken_test.go"), free }
}

func ref(bd pool.Bounds, d defect) func() ([]outcome, func()) {
	return func() ([]outcome, func()) {
		ctor, free := newRef(bd, d)
		return transportSuite().run(ctor, "broken_test.go"), free
	}
}

func backings(ctor func() (pool.Backing, error)) func() ([]outcome, func()) {
	return func() ([]outcome, func()) { return backingSuite().run(ctor, "broken_test.go"), nil }
}

func policies(ctor func() (pool.ReusePolicy, error)) func() ([]outcome, func()) {
	return func() ([]outcome, func()) { return policySuite().run(ctor, "broken_test.go"), nil }
}

func pools(ctor func() (subject, error)) func() ([]outcome, func()) {
	return func() ([]outcome, func()) { return poolSuite().run(ctor, "broken_test.go"), nil }
}

func brokenComponents() []brokenComponent {
	return []brokenComponent{
		// Transports.
		{name: "transport loses every fifth chunk", want: found{"ChunkCopied": ErrLost, "ChunkLengths": ErrLost, "DrainAfterSend": ErrLost, "EmptyChunk": ErrLost, "ExactlyOnce": ErrLost, "HandleValues": ErrLost, "Instances": ErrLost, "Retire": ErrLost, "RetiredForgotten": ErrLost, "ZeroAllocs": ErrLost}, run: transports(func() (pool.Transport, error) {
			return &lossyTransport{Transport: mailbox.New()}, nil
		}, nil)},
		{name: "transport delivers a handle twice", want: found{"ChunkCopied": ErrDuplicated, "ChunkLengths": ErrDuplicated, "DrainAfterSend": ErrLost, "DrainEmpty": ErrDuplicated, "EmptyChunk": ErrDuplicated, "ExactlyOnce": ErrDuplicated, "HandleValues": ErrDuplicated, "Instances": ErrDuplicated, "Retire": ErrDuplicated, "RetiredForgotten": ErrDuplicated, "ZeroAllocs": ErrDuplicated}, run: transports(func() (pool.Transport, error) {
			return dupTransport{mailbox.New()}, nil
		}, nil)},
		{name: "transport keeps the caller's chunk", want: found{"ChunkCopied": ErrAliased, "Close": ErrContract, "CloseWhileSending": ErrContract, "ExactlyOnce": ErrDuplicated, "Retire": ErrContract, "RetiredForgotten": ErrLost, "ZeroAllocs": ErrAllocs}, run: transports(func() (pool.Transport, error) {
			return &aliasingTransport{}, nil
		}, nil), onlyWithoutRace: "the race detector itself reports the aliasing transport's data race"},
		{name: "transport never returns from Send", want: found{"ChunkCopied": ErrDeadlock, "ChunkLengths": ErrDeadlock, "Close": ErrDeadlock, "CloseWhileSending": ErrDeadlock, "DrainAfterSend": ErrDeadlock, "DrainEmpty": ErrDeadlock, "EmptyChunk": ErrDeadlock, "ExactlyOnce": ErrDeadlock, "HandleValues": ErrDeadlock, "Instances": ErrDeadlock, "Retire": ErrDeadlock, "RetiredForgotten": ErrDeadlock, "ZeroAllocs": ErrDeadlock}, run: func() ([]outcome, func()) {
			release := make(chan struct{})
			return transportSuite().run(func() (pool.Transport, error) {
				return stuckTransport{mailbox.New(), release}, nil
			}, "broken_test.go"), func() { close(release) }
		}},
		{name: "reference transport, unbounded", run: ref(unbounded, correct)},
		{name: "reference transport, per-handle queues", run: ref(boundedHandle, correct)},
		{name: "reference transport, one shared queue", run: ref(boundedShared, correct)},
		{name: "reference transport, chunk queues", run: ref(boundedChunk, correct)},
		{name: "redelivers a queue's last item once", want: found{"ChunkCopied": ErrDuplicated, "ChunkLengths": ErrDuplicated, "DrainAfterSend": ErrDuplicated, "DrainEmpty": ErrDuplicated, "EmptyChunk": ErrDuplicated, "ExactlyOnce": ErrDuplicated, "HandleValues": ErrDuplicated, "Instances": ErrDuplicated, "Retire": ErrDuplicated}, run: ref(unbounded, defectGhost)},
		{name: "delivers one Drain late", want: found{"DrainAfterSend": ErrLost}, run: ref(unbounded, defectLag)},
		{name: "holds sends back until 8 handles", want: found{"ChunkCopied": ErrLost, "ChunkLengths": ErrLost, "DrainAfterSend": ErrLost, "DrainEmpty": ErrLost, "EmptyChunk": ErrLost, "ExactlyOnce": ErrOrder, "Instances": ErrLost, "Retire": ErrLost, "RetiredForgotten": ErrLost, "ZeroAllocs": ErrLost}, run: ref(unbounded, defectHoldBack)},
		{name: "drops the last handle of long chunks", want: found{"ChunkCopied": ErrLost, "ChunkLengths": ErrLost, "ExactlyOnce": ErrLost, "Retire": ErrLost}, run: ref(unbounded, defectTruncate)},
		{name: "merges repeated handles", want: found{"DrainAfterSend": ErrLost, "ExactlyOnce": ErrLost, "HandleValues": ErrLost, "Retire": ErrLost, "RetiredForgotten": ErrLost}, run: ref(unbounded, defectMergeRepeats)},
		{name: "loses the high bits of generations", want: found{"ChunkCopied": ErrCorrupted, "ChunkLengths": ErrCorrupted, "DrainAfterSend": ErrCorrupted, "DrainEmpty": ErrCorrupted, "EmptyChunk": ErrCorrupted, "ExactlyOnce": ErrCorrupted, "HandleValues": ErrCorrupted, "Instances": ErrCorrupted, "Retire": ErrCorrupted}, run: ref(unbounded, defectHighGen)},
		{name: "delivers an empty chunk as a zero handle", want: found{"EmptyChunk": ErrCorrupted}, run: ref(unbounded, defectEmptyZero)},
		{name: "delivers newest first", want: found{"EmptyChunk": ErrOrder, "ExactlyOnce": ErrOrder, "HandleValues": ErrOrder, "Retire": ErrOrder}, run: ref(unbounded, defectNewestFirst)},
		{name: "instances share queues", want: found{"Instances": ErrContract}, run: ref(unbounded, defectGlobal)},
		{name: "every 64th Send allocates", want: found{"ZeroAllocs": ErrAllocs}, run: ref(unbounded, defectAllocs)},
		{name: "bounds drift", want: found{"Bounds": ErrContract}, run: ref(boundedHandle, defectBoundsDrift)},
		{name: "bounded producers cannot TrySend", want: found{"BatchLimit": ErrContract, "Bounds": ErrContract, "Capacity": ErrContract, "CloseReleasesBlocked": ErrContract, "Retire": ErrContract}, run: ref(boundedHandle, defectNotTry)},
		{name: "claims a queue per producer, shares one", want: found{"BatchLimit": ErrContract, "Capacity": ErrContract, "DrainAfterSend": ErrDeadlock, "RetiredForgotten": ErrDeadlock}, run: ref(pool.Bounds{Capacity: 4, Batch: 2, PerProducer: true}, defectSharedQueue)},
		{name: "holds one item more than its capacity", want: found{"Capacity": ErrContract}, run: ref(boundedHandle, defectExtraSlot)},
		{name: "TrySend is all or nothing", want: found{"Capacity": ErrContract}, run: ref(boundedHandle, defectAllOrNothing)},
		{name: "Send into a full queue does not wait", want: found{"Capacity": ErrContract}, run: ref(boundedHandle, defectSendOverflows)},
		{name: "a full queue gives a Drain one item more", want: found{"BatchLimit": ErrContract}, run: ref(boundedHandle, defectFullBatch)},
		{name: "a Drain takes one item per queue", want: found{"BatchLimit": ErrContract, "DrainAfterSend": ErrLost}, run: ref(boundedShared, defectOnePerDrain)},
		{name: "splits chunk items across drains", want: found{"BatchLimit": ErrContract, "DrainAfterSend": ErrLost}, run: ref(boundedChunk, defectSplitChunks)},
		{name: "long sends succeed after Close", want: found{"Close": ErrContract, "CloseWhileSending": ErrContract}, run: ref(unbounded, defectLongAfterClose)},
		{name: "TrySend succeeds after Close", want: found{"Close": ErrContract, "CloseWhileSending": ErrContract}, run: ref(boundedHandle, defectTryAfterClose)},
		{name: "NewProducer after Close returns nothing", want: found{"Close": ErrContract}, run: ref(unbounded, defectNilAfterClose)},
		{name: "Close stops the first three producers only", want: found{"CloseWhileSending": ErrContract}, run: ref(unbounded, defectCloseFirstThree)},
		{name: "Close leaves blocked producers waiting", want: found{"CloseReleasesBlocked": ErrDeadlock, "CloseWhileSending": ErrDeadlock}, run: ref(boundedHandle, defectCloseNoWake)},
		{name: "a retired producer still sends", want: found{"Retire": ErrContract}, run: ref(unbounded, defectRetireOpen)},
		{name: "retiring drops pending handles", want: found{"Retire": ErrLost, "RetiredForgotten": ErrLost}, run: ref(boundedHandle, defectRetireDrops)},
		{name: "retiring twice fails", want: found{"Retire": ErrContract}, run: ref(unbounded, defectRetireTwice)},
		{name: "retired queues are kept", want: found{"RetiredForgotten": ErrRetained}, run: ref(unbounded, defectRetireKeeps)},
		{name: "retired producers leave goroutines", want: found{"RetiredForgotten": ErrRetained}, run: ref(unbounded, defectRetireGoroutine)},
		{name: "a Drain before any producer delivers a zero handle", want: found{"DrainEmpty": ErrCorrupted}, run: ref(unbounded, defectPhantom)},
		{name: "a Drain takes from two queues at most", want: found{"DrainAfterSend": ErrLost}, run: ref(unbounded, defectTwoQueues)},
		{name: "a chunk of 2048 handles loses one", want: found{"ChunkLengths": ErrLost}, run: ref(unbounded, defect2048)},
		{name: "the zero handle is never delivered", want: found{"HandleValues": ErrLost}, run: ref(unbounded, defectDropZero)},
		{name: "a Send woken by Close partway through a chunk waits on", want: found{"CloseReleasesBlocked": ErrDeadlock}, run: ref(boundedHandle, defectCloseMidChunk)},

		// Backings.
		{name: "backing overlaps blocks", want: found{"Disjoint": ErrAliased}, run: backings(func() (pool.Backing, error) {
			return overlapBacking{mustHeapBacking(64, 64)}, nil
		})},
		{name: "backing is not zeroed", want: found{"Zeroed": ErrContract}, run: backings(func() (pool.Backing, error) { return newDirty(), nil })},
		{name: "backing aliases blocks 256 apart", want: found{"Disjoint": ErrAliased}, run: backings(func() (pool.Backing, error) {
			return farAliasBacking{mustHeapBacking(16, 256)}, nil
		})},
		{name: "backing instances share memory", want: found{"Disjoint": ErrAliased, "Zeroed": ErrContract}, run: func() ([]outcome, func()) {
			return backingSuite().run(newSharedBackings(), "broken_test.go"), nil
		}},
		{name: "backing recycles memory unzeroed", want: found{"Zeroed": ErrContract}, run: func() ([]outcome, func()) {
			return backingSuite().run(newRecyclingBackings(), "broken_test.go"), nil
		}},
		{name: "backing moves a block now and then", want: found{"Stable": ErrContract}, run: backings(func() (pool.Backing, error) {
			return &unstableBacking{Backing: mustHeapBacking(64, 8), calls: make([]int, 8)}, nil
		})},
		{name: "backing Len changes now and then", want: found{"Geometry": ErrContract}, run: backings(func() (pool.Backing, error) {
			return &lenLiarBacking{Backing: mustHeapBacking(64, 8)}, nil
		})},
		{name: "backing Close fails", want: found{"CloseTwice": ErrContract}, run: backings(func() (pool.Backing, error) {
			return closeErrBacking{mustHeapBacking(64, 8)}, nil
		})},
		{name: "backing block has spare capacity", want: found{"Geometry": ErrContract}, run: backings(func() (pool.Backing, error) {
			return spareCapBacking{mustHeapBacking(64, 8)}, nil
		})},
		{name: "backing panics when closed twice", want: found{"CloseTwice": ErrContract}, run: backings(func() (pool.Backing, error) {
			return &panicTwiceBacking{Backing: mustHeapBacking(64, 8)}, nil
		})},

		// Policies.
		{name: "policy changes its order on every call", want: found{"PoolFollowsOrder": ErrOrder, "StableOrder": ErrOrder}, run: policies(func() (pool.ReusePolicy, error) {
			return flipPolicy{new(int)}, nil
		})},
		{name: "policy changes its order after 500 calls", want: found{"StableOrder": ErrOrder}, run: policies(func() (pool.ReusePolicy, error) {
			return lateFlipPolicy{new(int)}, nil
		})},
		{name: "policy order is invalid", want: found{"PoolFollowsOrder": ErrContract, "ValidOrder": ErrContract}, run: policies(func() (pool.ReusePolicy, error) { return invalidPolicy{}, nil })},
		{name: "every third policy is unstable", want: found{"StableOrder": ErrOrder}, run: func() ([]outcome, func()) {
			return policySuite().run(newEveryThird(), "broken_test.go"), nil
		}},

		// Pools.
		{name: "pool over a lossy transport", want: found{"Accounting": ErrLost, "DrainUntilSatisfied": ErrLost, "RemoteExactlyOnce": ErrLost, "RetiredSendersForgotten": ErrLost, "ReuseOrder": ErrLost, "SenderRetire": ErrLost, "Snapshot": ErrLost, "StaleHandle": ErrLost, "TryFreeChunk": ErrLost, "ZeroAllocs": ErrLost}, run: pools(func() (subject, error) {
			return realPool(&lossyTransport{Transport: mailbox.New()})
		})},
		{name: "pool over a duplicating transport", want: found{"Accounting": ErrDuplicated, "DrainOnExhaustion": ErrAccounting, "DrainUntilSatisfied": ErrAccounting, "RemoteExactlyOnce": ErrDuplicated, "RemoteRejects": ErrContract, "RetiredSendersForgotten": ErrDuplicated, "ReuseOrder": ErrLost, "SenderRetire": ErrDuplicated, "Snapshot": ErrDuplicated, "StaleHandle": ErrAccounting, "TryFreeChunk": ErrLost, "ZeroAllocs": ErrLost}, run: pools(func() (subject, error) {
			return realPool(dupTransport{mailbox.New()})
		})},
		{name: "pool ignores generations", want: found{"Accounting": ErrAliased, "Close": ErrContract, "DrainOnExhaustion": ErrAccounting, "ForeignHandle": ErrAliased, "ForgedHandle": ErrContract, "RemoteExactlyOnce": ErrAccounting, "RemoteRejects": ErrContract, "RetiredSendersForgotten": ErrContract, "ReuseOrder": ErrLost, "SenderRetire": ErrAccounting, "Snapshot": ErrContract, "StaleHandle": ErrAliased, "TryFreeChunk": ErrAccounting, "ZeroAllocs": ErrLost}, run: pools(func() (subject, error) { return newNoGenPool(), nil })},
		{name: "pool breaks its order", want: found{"FreshOrder": ErrOrder, "ReuseOrder": ErrOrder}, run: pools(wrapped(func() (subject, error) {
			b := mustHeapBacking(64, 128)
			p, err := pool.New(b, mailbox.New(), fixedPolicy(pool.FIFO))
			return poolSubject[*heap.Backing, *mailbox.Transport, fixedPolicy]{p}, err
		}, func(s subject) subject { return mislabeled{s} }))},
		{name: "pool allocations never drain", want: found{"DrainOnExhaustion": ErrLost, "DrainUntilSatisfied": ErrLost}, run: pools(wrapped(mailboxPool, func(s subject) subject { return lazyPool{s} }))},
		{name: "pool allocations drain once", want: found{"DrainUntilSatisfied": ErrLost}, run: pools(wrapped(tinyShardedPool, func(s subject) subject { return oneDrainPool{s} }))},
		{name: "pool senders ignore Close", want: found{"RetiredSendersForgotten": ErrRetained, "SenderRetire": ErrContract}, run: pools(wrapped(mailboxPool, func(s subject) subject { return zombiePool{s} }))},
		{name: "pool keeps retired senders", want: found{"RetiredSendersForgotten": ErrRetained}, run: pools(wrapped(mailboxPool, func(s subject) subject {
			return keeperPool{s, new(sync.Mutex), new([]sender)}
		}))},
		{name: "pool snapshots are torn", want: found{"Snapshot": ErrAccounting}, run: pools(wrapped(mailboxPool, func(s subject) subject {
			return tornPool{s, new(sync.Mutex), new(pool.Stats), new(int)}
		}))},
		{name: "pool Alloc allocates now and then", want: found{"ZeroAllocs": ErrAllocs}, run: pools(wrapped(mailboxPool, func(s subject) subject {
			return allocPool{s, new(int), new([]byte)}
		}))},
		{name: "pool senders send long chunks after Close", want: found{"Close": ErrContract}, run: pools(wrapped(mailboxPool, func(s subject) subject {
			return leakyClosePool{s, new(bool)}
		}))},
		{name: "pool TryFreeChunk claims everything sent", want: found{"Close": ErrContract, "RemoteExactlyOnce": ErrLost, "SenderRetire": ErrLost, "TryFreeChunk": ErrContract}, run: pools(wrapped(tinyShardedPool, func(s subject) subject { return tryLiarPool{s} }))},
		{name: "pool drain histogram misses empty drains", want: found{"Accounting": ErrAccounting, "DrainUntilSatisfied": ErrAccounting, "Exhaustion": ErrAccounting, "FreshOrder": ErrAccounting, "RemoteExactlyOnce": ErrAccounting, "RemoteRejects": ErrAccounting, "RetiredSendersForgotten": ErrAccounting, "SenderRetire": ErrAccounting, "Snapshot": ErrAccounting}, run: pools(wrapped(mailboxPool, func(s subject) subject { return histogramPool{s} }))},
		{name: "pool TryFreeChunk sends 16 handles at most", want: found{"TryFreeChunk": ErrContract}, run: pools(wrapped(mailboxPool, func(s subject) subject { return cappedTryPool{s} }))},
		{name: "pool senders fail a second Close", want: found{"SenderRetire": ErrContract}, run: pools(wrapped(mailboxPool, func(s subject) subject { return closeTwicePool{s} }))},
		{name: "pool senders undercount", want: found{"Accounting": ErrAccounting}, run: pools(wrapped(mailboxPool, func(s subject) subject { return undercountPool{s} }))},
		{name: "pools share block memory", want: found{"ForeignHandle": ErrAliased}, run: func() ([]outcome, func()) {
			return poolSuite().run(newSharedMemoryPools(), "broken_test.go"), nil
		}},
		{name: "pools share one id", want: found{"ForeignHandle": ErrAliased, "RemoteRejects": ErrContract}, run: pools(wrapped(mailboxPool, func(s subject) subject {
			return oneIDPool{s, new(uint32), new([]pool.Handle)}
		}))},
	}
}

func TestSuiteRejectsBrokenComponents(t *testing.T) {
	for _, c := range brokenComponents() {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			if race.Enabled && c.onlyWithoutRace != "" {
				t.Skip(c.onlyWithoutRace)
			}
			synctest.Test(t, func(t *testing.T) {
				outs, free := c.run()
				if free != nil {
					free()
				}
				got := found{}
				for _, o := range outs {
					if o.err == nil {
						continue
					}
					if k, ok := c.maybe[o.name]; ok && (k == nil || kindOf(o.err) == k) {
						continue
					}
					got[o.name] = kindOf(o.err)
				}
				want := maps.Clone(c.want)
				if want == nil {
					want = found{}
				}
				if race.Enabled {
					delete(want, "ZeroAllocs") // skipped: the race runtime allocates
				}
				if !maps.Equal(got, want) {
					var msgs []string
					for _, o := range outs {
						if o.err != nil {
							msgs = append(msgs, o.err.Error())
						}
					}
					t.Errorf("got  %v\nwant %v\n%s", got, want, strings.Join(msgs, "\n"))
				}
			})
		})
	}
}

// TestLossReportedPromptly: a lost handle is reported as lost as soon as
// the producers are done and drains bring nothing more, within a second,
// not by the watchdog a minute later. In a synctest bubble the clock moves
// only when every goroutine waits, so it measures how long a case waited.
func TestLossReportedPromptly(t *testing.T) {
	t.Run("transport", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			promptly(t, transportSuite(), func() (pool.Transport, error) {
				return &lossyTransport{Transport: mailbox.New()}, nil
			})
		})
	})
	t.Run("pool", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			promptly(t, poolSuite(), func() (subject, error) {
				return realPool(&lossyTransport{Transport: mailbox.New()})
			})
		})
	})
}

// promptly runs each case of s alone and checks that the ones that find a
// loss find it within a second.
func promptly[X any](t *testing.T, s suite[X], newX func() (X, error)) {
	losses := 0
	for _, c := range s.cases {
		one := s
		one.cases = []testCase[X]{c}
		start := time.Now()
		o := one.run(newX, "broken_test.go")[0]
		took := time.Since(start)
		switch {
		case o.err == nil:
		case !errors.Is(o.err, ErrLost):
			t.Errorf("%s: %v, want a loss", c.name, o.err)
		case took >= time.Second:
			t.Errorf("%s: reported the loss after %v", c.name, took)
		default:
			losses++
		}
	}
	if losses == 0 {
		t.Error("no case found the loss")
	}
}
