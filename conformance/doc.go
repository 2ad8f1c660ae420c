// Package conformance is the public test suite that every locus component and
// every composed pool must pass: generation safety, exact accounting,
// exactly-once remote frees under racing producers, reuse order, exhaustion,
// close semantics and allocation-free hot paths.
//
// There is one driver per component kind and one for a whole pool:
//
//	TestBacking(t, newBacking)     CheckBacking(newBacking)
//	TestTransport(t, newTransport) CheckTransport(newTransport)
//	TestPolicy(t, newPolicy)       CheckPolicy(newPolicy)
//	TestPool(t, newPool)           CheckPool(newPool)
//
// A Test driver runs every case as a named subtest on a fresh instance built
// by the constructor, which receives the subtest's *testing.T (so it may call
// t.Fatal). The suite closes every instance it was given when the case ends.
// A Check driver runs the same cases outside go test and returns every
// violation, joined with errors.Join. Each violation is a *Violation naming
// its case, with the contract in plain words, and wraps one of the Err
// sentinels below, so callers can match it with errors.Is.
//
// Adopting the suite takes one line in a test:
//
//	func TestMyTransport(t *testing.T) {
//		conformance.TestTransport(t, func(t *testing.T) pool.Transport { return mytransport.New() })
//	}
//
// Every case runs under a watchdog: a case that has not finished after a
// minute (or before the test's deadline) closes its instance, which must
// release any goroutine blocked in it, and fails with ErrDeadlock instead of
// hanging the test binary.
//
// Like x/net/nettest, the suite should not produce false positives but may
// miss violations that depend on timing. Run it under the race detector, more
// than once: go test -race -count=5. Under -race the allocation cases are
// skipped, because the race runtime allocates.
package conformance
