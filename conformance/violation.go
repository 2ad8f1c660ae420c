package conformance

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

// The kinds of violation. Every *Violation wraps one of them.
var (
	// ErrLost: a freed handle or a sent chunk never came back.
	ErrLost = errors.New("conformance: lost")
	// ErrDuplicated: a handle came back, or a block was handed out, twice.
	ErrDuplicated = errors.New("conformance: duplicated")
	// ErrAliased: memory was reachable through a handle that does not own
	// it: a stale handle accepted, or two blocks sharing memory.
	ErrAliased = errors.New("conformance: aliased")
	// ErrOrder: blocks or chunks came back in an order the contract forbids.
	ErrOrder = errors.New("conformance: order")
	// ErrAccounting: a count is wrong.
	ErrAccounting = errors.New("conformance: accounting")
	// ErrContract: a call returned the wrong result or error.
	ErrContract = errors.New("conformance: contract")
	// ErrAllocs: a hot path allocated.
	ErrAllocs = errors.New("conformance: allocates")
	// ErrDeadlock: a case did not finish in time.
	ErrDeadlock = errors.New("conformance: deadlock")
)

// Violation is one broken contract, found by one case.
type Violation struct {
	// Case is the case's name, also its subtest name.
	Case string
	// Explanation is the contract the case checks.
	Explanation string
	// Err says what went wrong; it wraps one of the Err kinds.
	Err error
}

func (v *Violation) Error() string {
	return fmt.Sprintf("%s: %v\n\tcontract: %s", v.Case, v.Err, v.Explanation)
}

// Unwrap returns v.Err.
func (v *Violation) Unwrap() error { return v.Err }

// violationf builds a case's error: kind is one of the Err kinds.
func violationf(kind error, format string, args ...any) error {
	return fmt.Errorf("%w: %s", kind, fmt.Sprintf(format, args...))
}

// caseTimeout bounds one case; the suite's own tests shorten it.
var caseTimeout = time.Minute

// testCase is one named contract check on an instance of X.
type testCase[X any] struct {
	name        string
	explanation string
	run         func(ctx context.Context, x X) error
}

// suite runs a table of cases over fresh instances of X.
type suite[X any] struct {
	cases []testCase[X]
	// abort releases goroutines blocked in x without freeing memory the
	// case may still use; release frees x once the case has returned.
	abort   func(x X)
	release func(x X)
}

// runT runs every case as a subtest.
func (s suite[X]) runT(t *testing.T, newX func(t *testing.T) X) {
	t.Helper()
	for _, c := range s.cases {
		t.Run(c.name, func(t *testing.T) {
			x := newX(t)
			timeout := caseTimeout
			if d, ok := t.Deadline(); ok {
				if left := time.Until(d) - 5*time.Second; left < timeout {
					timeout = max(left, time.Second)
				}
			}
			if err := s.runCase(c, x, timeout); err != nil {
				t.Error(err)
			}
		})
	}
}

// runCheck runs every case and joins the violations.
func (s suite[X]) runCheck(newX func() (X, error)) error {
	var errs []error
	for _, c := range s.cases {
		x, err := newX()
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: constructor: %w", c.name, err))
			continue
		}
		if err := s.runCase(c, x, caseTimeout); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// runCase runs one case under the watchdog and returns its *Violation.
func (s suite[X]) runCase(c testCase[X], x X, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		defer func() {
			if r := recover(); r != nil {
				done <- violationf(ErrContract, "panic: %v", r)
			}
		}()
		done <- c.run(ctx, x)
	}()
	var err error
	select {
	case err = <-done:
		s.release(x)
	case <-ctx.Done():
		// Release goroutines blocked in the instance (a pool's abort
		// closes only its transport: its memory may still be in use),
		// then give the case a moment to notice.
		s.abort(x)
		select {
		case <-done:
			s.release(x)
		case <-time.After(min(timeout, 5*time.Second)):
			// Still running: leave the instance alone rather than free
			// memory (perhaps a mapping) that the case may still touch.
		}
		err = violationf(ErrDeadlock, "did not finish within %v", timeout)
	}
	if err == nil {
		return nil
	}
	return &Violation{Case: c.name, Explanation: c.explanation, Err: err}
}

// waitFor polls cond until it holds or ctx ends; it reports whether it held.
// Cases use it where the owner must keep draining while producers finish.
func waitFor(ctx context.Context, cond func() bool) bool {
	for !cond() {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(50 * time.Microsecond):
		}
	}
	return true
}
