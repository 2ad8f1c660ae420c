package conformance

import (
	"sync"
	"sync/atomic"
	"testing"

	"github.com/locus-go/locus/backing/heap"
	"github.com/locus-go/locus/pool"
	"github.com/locus-go/locus/transport/mailbox"
)

func brokenComponents() []brokenComponent {
	return []brokenComponent{
		// Transports.
		{
			name: "transport loses every fifth chunk",
			want: catches(ErrLost, "ChunkCopied", "ChunkLengths", "Churn", "DrainAfterSend", "EmptyChunk", "ExactlyOnce", "HandleValues", "Instances", "Retire", "RetiredForgotten", "Volume", "ZeroAllocs"),
			run: transports(func() (pool.Transport, error) {
				return &lossyTransport{Transport: mailbox.New()}, nil
			}, nil),
		},
		{
			name: "transport delivers a handle twice",
			want: catches(ErrDuplicated, "ChunkCopied", "ChunkLengths", "Churn", "DrainEmpty", "EmptyChunk", "ExactlyOnce", "HandleValues", "Instances", "Retire", "RetiredForgotten", "Volume", "ZeroAllocs").and(ErrLost, "DrainAfterSend"),
			run: transports(func() (pool.Transport, error) {
				return dupTransport{mailbox.New()}, nil
			}, nil),
		},
		{
			name: "transport keeps the caller's chunk",
			want: catches(ErrContract, "Close", "CloseWhileSending", "Retire").and(ErrLost, "RetiredForgotten").and(ErrAliased, "ChunkCopied").and(ErrDuplicated, "ExactlyOnce").and(ErrAllocs, "ZeroAllocs"),
			// What a reused buffer turns into depends on when the Drain comes.
			maybe: found{"Churn": nil, "Volume": nil},
			run: transports(func() (pool.Transport, error) {
				return &aliasingTransport{}, nil
			}, nil),
			onlyWithoutRace: "the race detector itself reports the aliasing transport's data race",
		},
		{
			name: "transport never returns from Send",
			want: catches(ErrDeadlock, "ChunkCopied", "ChunkLengths", "Churn", "Close", "CloseWhileSending", "DrainAfterSend", "DrainEmpty", "EmptyChunk", "ExactlyOnce", "HandleValues", "Instances", "Retire", "RetiredForgotten", "Volume", "ZeroAllocs"),
			run: func() ([]outcome, func()) {
				release := make(chan struct{})
				return transportSuite().lite().run(func() (pool.Transport, error) {
					return stuckTransport{mailbox.New(), release}, nil
				}, "broken_test.go"), func() { close(release) }
			},
		},
		{name: "reference transport, unbounded", run: ref(unbounded, correct)},
		{name: "reference transport, per-handle queues", run: ref(boundedHandle, correct)},
		{name: "reference transport, one shared queue", run: ref(boundedShared, correct)},
		{name: "reference transport, chunk queues", run: ref(boundedChunk, correct)},
		{
			name: "redelivers a queue's last item once",
			want: catches(ErrDuplicated, "ChunkCopied", "ChunkLengths", "DrainAfterSend", "DrainEmpty", "EmptyChunk", "ExactlyOnce", "HandleValues", "Instances", "Retire", "Volume"),
			// Churn sees it when a producer's queue empties between its sends.
			maybe: catches(ErrDuplicated, "Churn"),
			run:   ref(unbounded, defectGhost),
		},
		{
			name: "delivers one Drain late",
			want: catches(ErrLost, "DrainAfterSend", "Retire"),
			run:  ref(unbounded, defectLag),
		},
		{
			name: "holds sends back until 8 handles",
			want: catches(ErrLost, "ChunkCopied", "ChunkLengths", "Churn", "DrainAfterSend", "DrainEmpty", "EmptyChunk", "ExactlyOnce", "Instances", "Retire", "RetiredForgotten", "ZeroAllocs"),
			run:  ref(unbounded, defectHoldBack),
		},
		{
			name: "drops the last handle of long chunks",
			want: catches(ErrLost, "ChunkCopied", "ChunkLengths", "DrainAfterSend", "ExactlyOnce", "Retire", "ZeroAllocs"),
			run:  ref(unbounded, defectTruncate),
		},
		{
			name: "merges repeated handles",
			want: catches(ErrLost, "Churn", "DrainAfterSend", "ExactlyOnce", "HandleValues", "Retire", "RetiredForgotten"),
			run:  ref(unbounded, defectMergeRepeats),
		},
		{
			name: "loses the high bits of generations",
			want: catches(ErrCorrupted, "ChunkCopied", "ChunkLengths", "Churn", "DrainAfterSend", "DrainEmpty", "EmptyChunk", "ExactlyOnce", "HandleValues", "Instances", "Retire", "Volume"),
			run:  ref(unbounded, defectHighGen),
		},
		{
			name: "delivers an empty chunk as a zero handle",
			want: catches(ErrCorrupted, "EmptyChunk"),
			run:  ref(unbounded, defectEmptyZero),
		},
		{
			name: "delivers newest first",
			want: catches(ErrOrder, "ChunkLengths", "Churn", "EmptyChunk", "ExactlyOnce", "HandleValues", "Retire", "Volume"),
			run:  ref(unbounded, defectNewestFirst),
		},
		{
			name: "instances share queues",
			want: catches(ErrContract, "Instances"),
			run:  ref(unbounded, defectGlobal),
		},
		{
			name: "every 64th Send allocates",
			want: catches(ErrAllocs, "ZeroAllocs"),
			run:  ref(unbounded, defectAllocs),
		},
		{
			name: "bounds drift",
			want: catches(ErrContract, "Bounds"),
			run:  ref(boundedHandle, defectBoundsDrift),
		},
		{
			name: "bounded producers cannot TrySend",
			want: catches(ErrContract, "BatchLimit", "Bounds", "Capacity", "CloseReleasesBlocked", "Retire"),
			run:  ref(boundedHandle, defectNotTry),
		},
		{
			name: "claims a queue per producer, shares one",
			want: catches(ErrContract, "BatchLimit", "Capacity", "Retire").and(ErrDeadlock, "DrainAfterSend", "RetiredForgotten"),
			run:  ref(pool.Bounds{Capacity: 4, Batch: 2, PerProducer: true}, defectSharedQueue),
		},
		{
			name: "holds one item more than its capacity",
			want: catches(ErrContract, "Capacity"),
			run:  ref(boundedHandle, defectExtraSlot),
		},
		{
			name: "TrySend is all or nothing",
			want: catches(ErrContract, "Capacity"),
			run:  ref(boundedHandle, defectAllOrNothing),
		},
		{
			name: "Send into a full queue does not wait",
			want: catches(ErrContract, "Capacity"),
			run:  ref(boundedHandle, defectSendOverflows),
		},
		{
			name: "a full queue gives a Drain one item more",
			want: catches(ErrContract, "BatchLimit"),
			run:  ref(boundedHandle, defectFullBatch),
		},
		{
			name: "a Drain takes one item per queue",
			want: catches(ErrLost, "DrainAfterSend").and(ErrContract, "BatchLimit"),
			run:  ref(boundedShared, defectOnePerDrain),
		},
		{
			name: "splits chunk items across drains",
			want: catches(ErrLost, "DrainAfterSend").and(ErrContract, "BatchLimit"),
			run:  ref(boundedChunk, defectSplitChunks),
		},
		{
			name: "long sends succeed after Close",
			want: catches(ErrContract, "Close", "CloseWhileSending"),
			run:  ref(unbounded, defectLongAfterClose),
		},
		{
			name: "TrySend succeeds after Close",
			want: catches(ErrContract, "Close", "CloseWhileSending"),
			run:  ref(boundedHandle, defectTryAfterClose),
		},
		{
			name: "NewProducer after Close returns nothing",
			want: catches(ErrContract, "Close"),
			run:  ref(unbounded, defectNilAfterClose),
		},
		{
			name: "Close stops the first three producers only",
			want: catches(ErrContract, "CloseWhileSending"),
			run:  ref(unbounded, defectCloseFirstThree),
		},
		{
			name: "Close leaves blocked producers waiting",
			want: catches(ErrDeadlock, "CloseReleasesBlocked"),
			// When Close comes, a producer may or may not be waiting.
			maybe: catches(ErrDeadlock, "CloseWhileSending"),
			run:   ref(boundedHandle, defectCloseNoWake),
		},
		{
			name: "a retired producer still sends",
			want: catches(ErrContract, "Retire"),
			run:  ref(unbounded, defectRetireOpen),
		},
		{
			name: "retiring drops pending handles",
			want: catches(ErrLost, "Churn", "Retire", "RetiredForgotten"),
			run:  ref(boundedHandle, defectRetireDrops),
		},
		{
			name: "retiring twice fails",
			want: catches(ErrContract, "Retire"),
			run:  ref(unbounded, defectRetireTwice),
		},
		{
			name: "retired queues are kept",
			want: catches(ErrRetained, "RetiredForgotten"),
			run:  ref(unbounded, defectRetireKeeps),
		},
		{
			name: "retired producers leave goroutines",
			want: catches(ErrRetained, "RetiredForgotten"),
			run:  ref(unbounded, defectRetireGoroutine),
		},
		{
			name: "a Drain before any producer delivers a zero handle",
			want: catches(ErrCorrupted, "DrainEmpty"),
			// Churn sees it only if its owner drains before a lane made a
			// producer.
			maybe: catches(ErrCorrupted, "Churn"),
			run:   ref(unbounded, defectPhantom),
		},
		{
			name: "a Drain takes from two queues at most",
			want: catches(ErrLost, "DrainAfterSend", "Retire"),
			run:  ref(unbounded, defectTwoQueues),
		},
		{
			name: "a chunk of 2048 handles loses one",
			want: catches(ErrLost, "ChunkCopied", "ChunkLengths"),
			run:  ref(unbounded, defect2048),
		},
		{
			name: "the zero handle is never delivered",
			want: catches(ErrLost, "HandleValues"),
			run:  ref(unbounded, defectDropZero),
		},
		{
			name: "Send hands its chunk to the sink of the last Drain",
			want: catches(ErrContract, "ChunkCopied", "ChunkLengths", "Churn", "DrainAfterSend", "DrainEmpty", "EmptyChunk", "ExactlyOnce", "Instances", "Retire", "RetiredForgotten", "ZeroAllocs"),
			// CloseWhileSending sees it only if a Send lands after a Drain
			// began and before Close; on a loaded machine none may.
			maybe: catches(ErrContract, "CloseWhileSending"),
			run:   ref(unbounded, defectPutOnSend),
			// A producer calling the owner's sink races the owner's ledger.
			onlyWithoutRace: "the race detector itself reports the producer's call into the owner's sink",
		},
		{
			name: "a Send woken by Close partway through a chunk waits on",
			want: catches(ErrDeadlock, "CloseReleasesBlocked"),
			run:  ref(boundedHandle, defectCloseMidChunk),
		},

		{
			name: "drops the handle at each wrap of a 16-bit counter",
			want: catches(ErrLost, "Volume", "ZeroAllocs"),
			run:  ref(unbounded, defectWrap16),
		},
		{
			name: "with 9 live producers a one-handle chunk comes twice",
			want: catches(ErrDuplicated, "ExactlyOnce").and(ErrLost, "DrainAfterSend"),
			// Churn sees it when 9 of its lanes' producers are live at once.
			maybe: catches(ErrDuplicated, "Churn"),
			run:   ref(unbounded, defectCrowdDup),
		},
		{
			name: "chunks of more than 64 handles come one Drain late",
			want: catches(ErrLost, "DrainAfterSend"),
			run:  ref(unbounded, defectLongLate),
		},
		{
			name: "producers after the 4th come one Drain late",
			want: catches(ErrLost, "DrainAfterSend", "Retire"),
			run:  ref(unbounded, defectFifthLate),
		},
		{
			name: "instance k shares queues with instance k-4",
			want: catches(ErrContract, "Instances"),
			run:  ref(unbounded, defectFourTables),
		},
		{
			name: "retiring an idle producer leaks a goroutine",
			want: catches(ErrRetained, "RetiredForgotten"),
			run:  ref(unbounded, defectIdleLeak),
		},
		{
			name: "Close misses a Send blocked the second time",
			want: catches(ErrDeadlock, "CloseReleasesBlocked"),
			// When Close comes, a producer may or may not be waiting.
			maybe: catches(ErrDeadlock, "CloseWhileSending"),
			run:   ref(boundedHandle, defectReblock),
		},
		{
			name: "a queue holds one item more after 4 fills",
			want: catches(ErrContract, "Capacity"),
			run:  ref(boundedHandle, defectCapDrift),
		},
		{
			name: "with 4 busy queues a Drain takes one item less",
			want: catches(ErrContract, "BatchLimit").and(ErrLost, "DrainAfterSend"),
			run:  ref(pool.Bounds{Capacity: 4, Batch: 3, PerProducer: true}, defectBatchSplit),
		},
		{
			name: "a shared queue gives producers after the 3rd their own",
			want: catches(ErrContract, "BatchLimit", "Capacity"),
			run:  ref(boundedShared, defectPrivateAfter3),
		},
		{
			name: "a Drain allocates when two queues hold items",
			want: catches(ErrAllocs, "ZeroAllocs"),
			run:  ref(unbounded, defectAllocMulti),
		},
		{
			name: "a Send into a full queue spins",
			want: catches(ErrContract, "Capacity"),
			run:  ref(boundedHandle, defectSpin),
			// In a bubble time stands still while the spinner runs.
			outsideBubble: true,
		},
		{
			name: "with 100 items pending the next overtakes them",
			want: catches(ErrOrder, "ChunkLengths"),
			run:  ref(unbounded, defectBacklog),
		},

		// Backings.
		{
			name: "a Drain that removes a retired producer by swapping skips the one swapped in",
			want: catches(ErrLost, "Retire"),
			run:  ref(unbounded, defectSwapSkip),
		},
		{
			name: "backing overlaps blocks",
			want: catches(ErrAliased, "Disjoint"),
			run: backings(func() (pool.Backing, error) {
				return overlapBacking{mustHeapBacking(64, 64)}, nil
			}),
		},
		{
			name: "backing is not zeroed",
			want: catches(ErrContract, "Zeroed"),
			run:  backings(func() (pool.Backing, error) { return newDirty(), nil }),
		},
		{
			name: "backing aliases blocks 256 apart",
			want: catches(ErrAliased, "Disjoint"),
			run: backings(func() (pool.Backing, error) {
				return farAliasBacking{mustHeapBacking(16, 256)}, nil
			}),
		},
		{
			name: "backing instances share memory",
			want: catches(ErrAliased, "Disjoint").and(ErrContract, "Zeroed"),
			run: func() ([]outcome, func()) {
				return backingSuite().lite().run(newSharedBackings(), "broken_test.go"), nil
			},
		},
		{
			name: "backing recycles memory unzeroed",
			want: catches(ErrContract, "Zeroed"),
			run: func() ([]outcome, func()) {
				return backingSuite().lite().run(newRecyclingBackings(), "broken_test.go"), nil
			},
		},
		{
			name: "backing moves a block now and then",
			want: catches(ErrContract, "Stable"),
			run: backings(func() (pool.Backing, error) {
				return &unstableBacking{Backing: mustHeapBacking(64, 8), calls: make([]int, 8)}, nil
			}),
		},
		{
			name: "backing Len changes now and then",
			want: catches(ErrContract, "Geometry"),
			run: backings(func() (pool.Backing, error) {
				return &lenLiarBacking{Backing: mustHeapBacking(64, 8)}, nil
			}),
		},
		{
			name: "backing Close fails",
			want: catches(ErrContract, "CloseTwice"),
			run: backings(func() (pool.Backing, error) {
				return closeErrBacking{mustHeapBacking(64, 8)}, nil
			}),
		},
		{
			name: "backing block has spare capacity",
			want: catches(ErrContract, "Geometry"),
			run: backings(func() (pool.Backing, error) {
				return spareCapBacking{mustHeapBacking(64, 8)}, nil
			}),
		},
		{
			name: "backing panics when closed twice",
			want: catches(ErrContract, "CloseTwice"),
			run: backings(func() (pool.Backing, error) {
				return &panicTwiceBacking{Backing: mustHeapBacking(64, 8)}, nil
			}),
		},

		{
			name: "backing skips zeroing while two instances are live",
			want: catches(ErrContract, "Zeroed"),
			run: func() ([]outcome, func()) {
				return backingSuite().lite().run(newSpillBackings(16), "broken_test.go"), nil
			},
		},
		{
			name: "backing instance k shares memory with instance k-4",
			want: catches(ErrAliased, "Disjoint"),
			run: func() ([]outcome, func()) {
				return backingSuite().lite().run(newFourArenas(), "broken_test.go"), nil
			},
		},
		{
			name: "backing moves its blocks after 50000 calls",
			want: catches(ErrContract, "Stable"),
			run: backings(func() (pool.Backing, error) {
				return &lateMoveBacking{Backing: mustHeapBacking(64, 8)}, nil
			}),
		},
		{
			name: "backing Len shrinks after 50000 calls",
			want: catches(ErrContract, "Geometry"),
			run: backings(func() (pool.Backing, error) {
				return &lateLenBacking{Backing: mustHeapBacking(64, 8)}, nil
			}),
		},
		{
			name: "backing Close fails once the last byte was written",
			want: catches(ErrContract, "CloseTwice"),
			run: backings(func() (pool.Backing, error) {
				return canaryBacking{mustHeapBacking(64, 8)}, nil
			}),
		},

		// Policies.
		{
			name: "policy changes its order on every call",
			want: catches(ErrOrder, "PoolFollowsOrder", "StableOrder"),
			run: policies(func() (pool.ReusePolicy, error) {
				return flipPolicy{new(int)}, nil
			}),
		},
		{
			name: "policy changes its order after 500 calls",
			want: catches(ErrOrder, "StableOrder"),
			run: policies(func() (pool.ReusePolicy, error) {
				return lateFlipPolicy{new(int)}, nil
			}),
		},
		{
			name: "policy order is invalid",
			want: catches(ErrContract, "PoolFollowsOrder", "ValidOrder"),
			run:  policies(func() (pool.ReusePolicy, error) { return invalidPolicy{}, nil }),
		},
		{
			name: "every third policy is unstable",
			want: catches(ErrOrder, "StableOrder"),
			run: func() ([]outcome, func()) {
				return policySuite().lite().run(newEveryThird(), "broken_test.go"), nil
			},
		},

		{
			name: "policy changes its order after 50000 calls",
			want: catches(ErrOrder, "StableOrder"),
			run: policies(func() (pool.ReusePolicy, error) {
				return lateFlipPolicy50k{new(int)}, nil
			}),
		},
		{
			name: "policy changes its order after 300000 calls",
			want: catches(ErrOrder, "StableOrder"),
			run: policies(func() (pool.ReusePolicy, error) {
				return lateFlipPolicy300k{new(int)}, nil
			}),
		},
		{
			// One counter for every instance: the instances of StableOrder
			// flip it between them.
			name: "policies change their order after 2000000 calls among them",
			want: catches(ErrOrder, "StableOrder"),
			run: func() ([]outcome, func()) {
				n := new(int)
				return policySuite().lite().run(func() (pool.ReusePolicy, error) {
					return sharedFlipPolicy{n}, nil
				}, "broken_test.go"), nil
			},
		},
		{
			name: "pool over a transport whose Drain allocates with two busy queues",
			want: catches(ErrAllocs, "ZeroAllocs"),
			run:  refPools(unbounded, defectAllocMulti),
		},

		// Pools.
		{
			name: "pool over a lossy transport",
			want: catches(ErrLost, "Accounting", "DrainUntilSatisfied", "RemoteExactlyOnce", "RetiredSendersForgotten",
				"ReuseOrder", "SenderRetire", "Snapshot", "StaleHandle", "TryFreeChunk", "ZeroAllocs"),
			run: pools(func() (subject, error) {
				return realPool(&lossyTransport{Transport: mailbox.New()})
			}),
		},
		{
			name: "pool over a duplicating transport",
			want: catches(ErrLost, "ReuseOrder", "TryFreeChunk", "ZeroAllocs").and(ErrDuplicated, "Accounting",
				"RemoteExactlyOnce", "RetiredSendersForgotten", "SenderRetire", "Snapshot").and(ErrAccounting,
				"DrainOnExhaustion", "DrainUntilSatisfied", "StaleHandle").and(ErrContract, "RemoteRejects"),
			run: pools(func() (subject, error) {
				return realPool(dupTransport{mailbox.New()})
			}),
		},
		{
			name: "pool ignores generations",
			want: catches(ErrLost, "ReuseOrder", "ZeroAllocs").and(ErrAliased, "Accounting", "ForeignHandle",
				"StaleHandle").and(ErrAccounting, "DrainOnExhaustion", "SenderRetire",
				"TryFreeChunk").and(ErrContract, "Close", "ForgedHandle", "RemoteExactlyOnce", "RemoteRejects", "RetiredSendersForgotten"),
			// What a pool broken everywhere does under workers depends on
			// which blocks they hold at the time.
			maybe: found{"Snapshot": nil},
			run:   pools(func() (subject, error) { return newNoGenPool(), nil }),
		},
		{
			name: "pool breaks its order",
			want: catches(ErrOrder, "FreshOrder", "ReuseOrder"),
			run: pools(wrapped(func() (subject, error) {
				b := mustHeapBacking(64, 128)
				p, err := pool.New(b, mailbox.New(), fixedPolicy(pool.FIFO))
				return poolSubject[*heap.Backing, *mailbox.Transport, fixedPolicy]{p}, err
			}, func(s subject) subject { return mislabeled{s} })),
		},
		{
			name: "pool allocations never drain",
			want: catches(ErrLost, "DrainOnExhaustion", "DrainUntilSatisfied"),
			run:  pools(wrapped(mailboxPool, func(s subject) subject { return lazyPool{s} })),
		},
		{
			name: "pool allocations drain once",
			want: catches(ErrLost, "DrainUntilSatisfied"),
			run:  pools(wrapped(tinyShardedPool, func(s subject) subject { return oneDrainPool{s} })),
		},
		{
			name: "pool senders ignore Close",
			want: catches(ErrContract, "SenderRetire").and(ErrRetained, "RetiredSendersForgotten"),
			run:  pools(wrapped(mailboxPool, func(s subject) subject { return zombiePool{s} })),
		},
		{
			name: "pool keeps retired senders",
			want: catches(ErrRetained, "RetiredSendersForgotten"),
			run: pools(wrapped(mailboxPool, func(s subject) subject {
				return keeperPool{s, new(sync.Mutex), new([]sender)}
			})),
		},
		{
			name: "pool snapshots are torn",
			want: catches(ErrAccounting, "Snapshot"),
			run: pools(wrapped(mailboxPool, func(s subject) subject {
				return tornPool{s, new(sync.Mutex), new(pool.Stats), new(int)}
			})),
		},
		{
			name: "pool snapshots refresh only at Stats",
			want: catches(ErrAccounting, "Snapshot"),
			run: pools(wrapped(mailboxPool, func(s subject) subject {
				return statsOnlyPool{s, new(sync.Mutex), new(pool.Stats)}
			})),
		},
		{
			name: "pool Alloc allocates now and then",
			want: catches(ErrAllocs, "ZeroAllocs"),
			run: pools(wrapped(mailboxPool, func(s subject) subject {
				return allocPool{s, new(int), new([]byte)}
			})),
		},
		{
			name: "pool senders send long chunks after Close",
			want: catches(ErrContract, "Close"),
			run: pools(wrapped(mailboxPool, func(s subject) subject {
				return leakyClosePool{s, new(bool)}
			})),
		},
		{
			name: "pool TryFreeChunk claims everything sent",
			want: catches(ErrLost, "RemoteExactlyOnce", "SenderRetire").and(ErrContract, "Close", "TryFreeChunk"),
			run:  pools(wrapped(tinyShardedPool, func(s subject) subject { return tryLiarPool{s} })),
		},
		{
			name: "pool drain histogram misses empty drains",
			want: catches(ErrAccounting, "Accounting", "DrainUntilSatisfied", "Exhaustion", "FreshOrder",
				"RemoteExactlyOnce", "RemoteRejects", "RetiredSendersForgotten", "SenderRetire", "Snapshot"),
			run: pools(wrapped(mailboxPool, func(s subject) subject { return histogramPool{s} })),
		},
		{
			name: "pool TryFreeChunk sends 16 handles at most",
			want: catches(ErrContract, "TryFreeChunk"),
			run:  pools(wrapped(mailboxPool, func(s subject) subject { return cappedTryPool{s} })),
		},
		{
			name: "pool senders fail a second Close",
			want: catches(ErrContract, "SenderRetire"),
			run:  pools(wrapped(mailboxPool, func(s subject) subject { return closeTwicePool{s} })),
		},
		{
			name: "pool senders undercount",
			want: catches(ErrAccounting, "Accounting"),
			run:  pools(wrapped(mailboxPool, func(s subject) subject { return undercountPool{s} })),
		},
		{
			name: "pool over a backing that skips zeroing while two are live",
			want: catches(ErrContract, "FreshOrder"),
			run:  pools(backingPool(newSpillBackings(128))),
		},
		{
			name: "pool over a backing whose Close fails once the last byte was written",
			want: catches(ErrContract, "Close"),
			run: pools(backingPool(func() (pool.Backing, error) {
				return canaryBacking{mustHeapBacking(64, 128)}, nil
			})),
		},
		{
			name: "pool over a transport that leaks a goroutine per idle retiree",
			want: catches(ErrRetained, "RetiredSendersForgotten"),
			run:  refPools(unbounded, defectIdleLeak),
		},
		{
			name: "pool over a transport whose backlog is overtaken",
			want: catches(ErrOrder, "ReuseOrder"),
			run:  refPools(unbounded, defectBacklog),
		},
		{
			name: "pool over a transport whose Close misses a Send blocked the second time",
			want: catches(ErrDeadlock, "Close"),
			run:  refPools(boundedHandle, defectReblock),
		},
		{
			name: "pool over a transport whose producers after the 4th come one Drain late",
			want: catches(ErrLost, "RemoteExactlyOnce"),
			// SenderRetire sees it when its last drains find late blocks.
			maybe: catches(ErrLost, "SenderRetire"),
			run:   refPools(unbounded, defectFifthLate),
		},
		{
			name: "pool over a shared queue whose producers after the 3rd get private queues",
			want: catches(ErrContract, "TryFreeChunk").and(ErrLost, "RemoteExactlyOnce"),
			run:  refPools(boundedShared, defectPrivateAfter3),
		},
		{
			name: "pools share block memory",
			want: catches(ErrAliased, "ForeignHandle", "FreshOrder"),
			run: func() ([]outcome, func()) {
				return poolSuite().lite().run(newSharedMemoryPools(), "broken_test.go"), nil
			},
		},
		{
			name: "pool blocks share memory in pairs",
			want: catches(ErrAliased, "ForeignHandle", "NoAliasing"),
			// The workers see it when the owner happens to tag two blocks
			// of a pair with different generations.
			maybe:           catches(ErrAliased, "RemoteExactlyOnce", "SenderRetire"),
			run:             pools(newPairedPools()),
			onlyWithoutRace: "the race detector itself reports the workers' writes to shared memory",
		},
		{
			name: "pool accepts a handle of the next allocation",
			want: catches(ErrAliased, "ForgedHandle").and(ErrAccounting, "StaleHandle"),
			run:  pools(wrapped(mailboxPool, func(s subject) subject { return futureGenPool{s} })),
		},
		{
			name: "pool AllocBytes on an empty pool says nothing",
			want: catches(ErrContract, "Exhaustion"),
			run:  pools(wrapped(mailboxPool, func(s subject) subject { return silentPool{s} })),
		},
		{
			name: "pool generations are kept in 16 bits",
			want: catches(ErrAliased, "StaleHandle"),
			run: pools(wrapped(mailboxPool, func(s subject) subject {
				return mappedPool{s, &gen16{gens: make([]atomic.Uint64, capacityOf(s))}, new([]pool.Handle)}
			})),
		},
		{
			name: "pools reuse the ids of closed pools",
			want: catches(ErrAliased, "ForeignHandle"),
			run:  pools(wrapped(mailboxPool, newRecyclingPool)),
		},
		{
			name: "pools share one id",
			want: catches(ErrAliased, "ForeignHandle").and(ErrContract, "RemoteRejects"),
			run: pools(wrapped(mailboxPool, func(s subject) subject {
				return oneIDPool{s, new(uint32), new([]pool.Handle)}
			})),
		},
	}
}

func TestSuiteRejectsBrokenComponents(t *testing.T) { rejectsBroken(t, brokenComponents(), true) }
