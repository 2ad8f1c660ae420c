package conformance

import (
	"errors"
	"fmt"
	"runtime/debug"
)

// The kinds of violation. Every *Violation wraps one of them.
var (
	// ErrLost: a freed handle or a sent chunk never came back.
	ErrLost = errors.New("conformance: lost")
	// ErrDuplicated: a handle came back, or a block was handed out, twice.
	ErrDuplicated = errors.New("conformance: duplicated")
	// ErrAliased: memory was reachable through a handle that does not own
	// it (a stale handle accepted, two blocks sharing memory), or a
	// transport delivered what the sender wrote into its chunk after Send
	// returned.
	ErrAliased = errors.New("conformance: aliased")
	// ErrCorrupted: a handle came back changed: it was delivered with a
	// value that no producer sent.
	ErrCorrupted = errors.New("conformance: corrupted")
	// ErrOrder: blocks or chunks came back in an order the contract forbids.
	ErrOrder = errors.New("conformance: order")
	// ErrAccounting: a count is wrong.
	ErrAccounting = errors.New("conformance: accounting")
	// ErrContract: a call returned the wrong result or error.
	ErrContract = errors.New("conformance: contract")
	// ErrAllocs: a hot path allocated.
	ErrAllocs = errors.New("conformance: allocates")
	// ErrRetained: something retired or closed (a producer, a sender) still
	// holds memory or goroutines.
	ErrRetained = errors.New("conformance: retained")
	// ErrDeadlock: a case did not finish in time: a call into the
	// component blocked and did not return.
	ErrDeadlock = errors.New("conformance: deadlock")
)

// Violation is one broken contract, found by one case.
type Violation struct {
	// Case is the case's name, also its subtest name.
	Case string
	// Explanation is the contract the case checks.
	Explanation string
	// Caller is the file:line where the user's code called the suite
	// (TestTransport, CheckPool, ...), so that a failure in a table of
	// components points at the one that failed.
	Caller string
	// Err says what went wrong; it wraps one of the Err kinds.
	Err error
}

func (v *Violation) Error() string {
	s := fmt.Sprintf("%s: %v\n\tcontract: %s", v.Case, v.Err, v.Explanation)
	if v.Caller != "" {
		s += "\n\tsuite called at " + v.Caller
	}
	return s
}

// Unwrap returns v.Err.
func (v *Violation) Unwrap() error { return v.Err }

// violationf builds a case's error: kind is one of the Err kinds.
func violationf(kind error, format string, args ...any) error {
	return fmt.Errorf("%w: %s", kind, fmt.Sprintf(format, args...))
}

// failure carries a failed check (or a skip) up the stack of the goroutine
// that made it, to the recover in runCase (the case's goroutine), crew.Go
// (its helpers) or attempt: a check that fails ends the case at once, the way t.FailNow
// ends a test, so that each check is one line. A failure never leaves this
// package: every goroutine that makes checks recovers it, and no check is
// made inside a function a component calls back (a sink, an eviction
// callback), whose unwinding would run through the component's frames.
type failure struct{ err error }

// must ends the case with err, a violation or an error to report as it
// is, unless err is nil.
func must(err error) {
	if err != nil {
		panic(failure{err})
	}
}

// mustOK ends the case with a contract violation for what's error, unless
// err is nil.
func mustOK(what string, err error) { must(contractErr(what, err)) }

// mustIn is must(err) with err put in the context format and args say (a
// round, a step, an allocator), unless err is nil.
func mustIn(err error, format string, args ...any) { must(within(err, format, args...)) }

// within returns err put in the context format and args say, or nil.
func within(err error, format string, args ...any) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", fmt.Sprintf(format, args...), err)
}

// attempt runs f and returns the error of a check that failed in it
// instead of ending the case, so that the caller can say where it failed
// or finish its work first. A panic that is no failed check goes on.
func attempt(f func()) (err error) {
	defer func() {
		if p := recover(); p != nil {
			fl, ok := p.(failure)
			if !ok {
				panic(p)
			}
			err = fl.err
		}
	}()
	f()
	return nil
}

// during runs f and, if a check in it fails, ends the case with that
// check's error in the context format and args say (see mustIn).
func during(f func(), format string, args ...any) { mustIn(attempt(f), format, args...) }

// require ends the case with a violation of kind unless ok. Its arguments
// are boxed even when ok: in a loop of many passes or a measured window,
// write the check as an if statement around must.
func require(ok bool, kind error, format string, args ...any) {
	if !ok {
		panic(failure{violationf(kind, format, args...)})
	}
}

// caught turns what a case's goroutine recovered into the error to report:
// a failed check's error, or a violation for a panic.
func caught(p any) error {
	if f, ok := p.(failure); ok {
		return f.err
	}
	return violationf(ErrContract, "panic: %v\n%s", p, debug.Stack())
}

// refusedOr is the violation of a call the model says must succeed: err,
// what the model found wrong, if the call failed, or a violation of kind
// ErrContract for a refusal that reported nothing.
func refusedOr(err error, format string, args ...any) error {
	if err != nil {
		return err
	}
	return violationf(ErrContract, format, args...)
}

// skipped is what a case returns when it does not apply to the instance (a
// capacity check on an unbounded transport, allocation counting under the
// race detector). It is not a violation: Test drivers report it with t.Skip
// and Check drivers leave it out of their result.
type skipped struct{ reason string }

func (s *skipped) Error() string { return "skipped: " + s.reason }

func skip(format string, args ...any) error { return &skipped{fmt.Sprintf(format, args...)} }

// contractErr is a contract violation for what's error, or nil.
func contractErr(what string, err error) error {
	if err != nil {
		return violationf(ErrContract, "%s: %v", what, err)
	}
	return nil
}

// call is a call's name and the error it returned.
type call struct {
	name string
	err  error
}

// allFail checks that every call failed with want; after says when, in a
// violation.
func allFail(want error, after string, calls []call) error {
	for _, c := range calls {
		if err := wantIs(c.name+" "+after, c.err, want); err != nil {
			return err
		}
	}
	return nil
}

// wantIs is a contract violation unless err is target.
func wantIs(what string, err, target error) error {
	if !errors.Is(err, target) {
		return violationf(ErrContract, "%s = %v, want %v", what, err, target)
	}
	return nil
}

// drainBlocks calls drain until want blocks came back, reporting them lost
// if a drain fails or want drains (more than enough for one block each)
// bring too few.
func drainBlocks(drain func() (int, error), want int) error {
	for got, i := 0, 0; got < want; i++ {
		n, err := drain()
		if err != nil || i > want {
			return violationf(ErrLost, "%d of %d remotely freed blocks drained (%v)", got, want, err)
		}
		got += n
	}
	return nil
}
