// Package conformance is the public test suite that every locus component and
// every composed pool must pass: generation safety, exact accounting,
// exactly-once delivery of remote frees under racing producers, the bounds a
// transport claims, reuse order, exhaustion, close and retirement semantics,
// consistent snapshots and allocation-free hot paths.
//
// There is one driver per component kind and one for a whole pool:
//
//	TestBacking(t, newBacking)     CheckBacking(newBacking)
//	TestTransport(t, newTransport) CheckTransport(newTransport)
//	TestPolicy(t, newPolicy)       CheckPolicy(newPolicy)
//	TestPool(t, newPool)           CheckPool(newPool)
//
// and one each for the allocators of several sizes built on pools:
//
//	TestClasses(t, newClasses)     CheckClasses(newClasses)
//	TestPages(t, newPages)         CheckPages(newPages)
//	TestTier(t, newTier)           CheckTier(newTier)
//
// A Test driver runs every case as a named subtest on fresh instances built by
// the constructor, which receives the subtest's *testing.T (so it may call
// t.Fatal); a case that checks that instances are independent calls it more
// than once. A case that does not apply (the bounds of an unbounded transport,
// allocation counts under the race detector) is skipped with t.Skip, never
// reported as a pass. The suite closes every instance it was given when the
// case ends.
//
// A Check driver runs the same cases outside go test: it calls no testing
// function, so it works from a plain program. It returns every violation,
// joined with errors.Join, and leaves out the cases that do not apply. Each
// violation is a *Violation that names its case, states the contract in plain
// words and gives the file and line that called the suite, and wraps one of
// the Err kinds below, so callers can match it with errors.Is.
//
// Adopting the suite takes one line in a test:
//
//	func TestMyTransport(t *testing.T) {
//		conformance.TestTransport(t, func(t *testing.T) pool.Transport { return mytransport.New() })
//	}
//
// # How hard it looks
//
// The cases are written against the contracts of package pool, for every way
// a component can break them, not against the components in this module:
//
//   - Sizes cross every boundary a component might have: chunk lengths from 1
//     to several times any node, queue or batch size, powers of two and their
//     neighbours, and random lengths.
//   - Contracts that hold every time are checked hundreds to thousands of
//     times; contracts about instances, across several instances from one
//     constructor.
//   - A transport's deliveries are accounted handle by handle: each is
//     attributed to the producer that sent it and compared, in order and field
//     by field, with what was sent, repeats included.
//   - Capabilities a component claims (pool.BoundedTransport, pool.TryProducer)
//     are checked against what it does.
//   - Allocations are counted as totals over a thousand calls, never as an
//     average; what retired producers and senders leave behind (live heap,
//     goroutines) is measured over thousands of them.
//   - Fields a component might keep narrower than the contract's are taken
//     past the wrap: a block or page reused 2^16+1 times (its old handles
//     must stay stale), a run pinned 2^16 times, priorities across the int
//     range and every content value; identities are checked across Close
//     (a closed allocator's handles are foreign to the next one); every
//     slice a component returns is checked for aliasing both ways; and a
//     component's read methods are called from its callbacks, with a
//     timeout, not a hang, for one that deadlocks there.
//
// # Time
//
// A case that waits for handles reports them lost as soon as every producer
// has returned and drains bring nothing more. Only a call into the component
// that never returns is left to the watchdog: when a case has not finished
// after a minute (or shortly before the test's deadline), the suite closes its
// instances, which must release any goroutine blocked in them, and reports
// ErrDeadlock. The suite's own goroutines end with their case.
//
// Like x/net/nettest, the suite should not produce false positives but may
// miss violations that depend on timing: run it under the race detector too,
// more than once (go test -race -count=5). Under -race the allocation cases are
// skipped, because the race runtime allocates. The cases that measure the
// whole process (allocations, live heap, goroutines) run alone among this
// package's cases, but not apart from other tests: do not run the suite in
// parallel with tests that allocate, or their allocations may be blamed on the
// component.
package conformance
