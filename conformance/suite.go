package conformance

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/locus-go/locus/internal/typednil"
)

// caseTimeout is the watchdog of one case: a case still running after it is
// deadlocked in a call into the component. (The suite's own tests with
// broken components run in testing/synctest bubbles, where it passes at
// once when every goroutine is blocked.)
const caseTimeout = time.Minute

// stopGrace is how long a case stopped by its watchdog, and its helper
// goroutines, get to return once the instance has been closed.
const stopGrace = 5 * time.Second

// testCase is one named contract check on an instance of X.
type testCase[X any] struct {
	name        string
	explanation string
	run         func(r *run[X]) error
	// whole is set for a case that measures the whole process (heap
	// allocations, live heap, goroutines): it runs alone among this
	// package's cases (see measuring).
	whole bool
}

// measuring keeps the cases that measure the whole process apart from the
// other cases of this package running in the process at the same time (in
// parallel tests): they hold it for writing, every other case for reading.
// Allocations of unrelated goroutines, which this package does not control,
// are dealt with by the cases themselves.
var measuring sync.RWMutex

// run is one case's run: the instance, the watchdog's context, and a way to
// get more instances from the same constructor.
type run[X any] struct {
	ctx   context.Context
	x     X
	reqs  chan chan built[X]
	light bool // see suite.light
}

// longest is the longest chunk the run's cases send.
func (r *run[X]) longest() int {
	if r.light {
		return lightChunk
	}
	return maxChunk
}

// scaled returns n scaled for the run: a quarter of it under the race
// detector, which slows exchanges down about tenfold, and a tenth in a
// light run.
func (r *run[X]) scaled(n int) int {
	if r.light {
		n /= 10
	}
	return scaled(n)
}

type built[X any] struct {
	x   X
	err error
}

// ctorError is a constructor's failure: not a violation of any contract.
type ctorError struct{ err error }

func (e *ctorError) Error() string { return "constructor: " + e.err.Error() }
func (e *ctorError) Unwrap() error { return e.err }

// another returns a further fresh instance from the constructor. The suite
// releases it with the case's own instance.
func (r *run[X]) another() (X, error) {
	var zero X
	reply := make(chan built[X], 1)
	select {
	case r.reqs <- reply:
	case <-r.ctx.Done():
		return zero, violationf(ErrDeadlock, "stopped while asking for another instance")
	}
	select {
	case b := <-reply:
		if b.err != nil {
			return zero, &ctorError{b.err}
		}
		return b.x, nil
	case <-r.ctx.Done():
		return zero, violationf(ErrDeadlock, "stopped while building another instance")
	}
}

// suite is a table of cases and how to stop and free an instance.
type suite[X any] struct {
	cases []testCase[X]
	// abort releases goroutines blocked in x without freeing memory the
	// case may still use; release frees x once the case has returned.
	abort   func(x X)
	release func(x X)
	// light shrinks the volume of the cases (the longest chunk, the
	// number of rounds) for the suite's own tests, which run it over
	// dozens of broken components: every check still runs, on less.
	light bool
}

// lite returns s in light mode.
func (s suite[X]) lite() suite[X] {
	s.light = true
	return s
}

// outcome is what one case found.
type outcome struct {
	name string
	skip string // why the case does not apply, if it does not
	err  error  // a *Violation, or an error of the constructor
}

// errNilComponent is a constructor's nil result: one error for the whole
// suite, not one stack trace per case.
var errNilComponent = errors.New("the constructor returned a nil component")

// errNilConstructor is a nil constructor function.
var errNilConstructor = errors.New("conformance: nil constructor")

// nonNil wraps a constructor so that a nil component is an error.
func nonNil[X any](build func() (X, error)) func() (X, error) {
	return func() (X, error) {
		x, err := build()
		if err == nil && typednil.Is(x) {
			err = errNilComponent
		}
		return x, err
	}
}

// adapt turns a typed constructor into the suite's: an error passes
// through, a nil component is errNilComponent, anything else is wrapped.
// A nil constructor gives nil, which runCheck reports.
func adapt[C, X any](newC func() (C, error), wrap func(C) X) func() (X, error) {
	if newC == nil {
		return nil
	}
	return func() (X, error) {
		var zero X
		c, err := newC()
		if err != nil {
			return zero, err
		}
		if typednil.Is(c) {
			return zero, errNilComponent
		}
		return wrap(c), nil
	}
}

// adaptT is adapt for go test constructors, which fail the test instead
// of returning an error; a nil component becomes the zero X, which the
// suite reports as errNilComponent.
func adaptT[C, X any](newC func(*testing.T) C, wrap func(C) X) func(*testing.T) X {
	if newC == nil {
		return nil
	}
	return func(t *testing.T) X {
		c := newC(t)
		if typednil.Is(c) {
			var zero X
			return zero
		}
		return wrap(c)
	}
}

// runT runs every case as a subtest of t.
func (s suite[X]) runT(t *testing.T, newX func(t *testing.T) X) {
	t.Helper()
	if newX == nil {
		t.Fatal(errNilConstructor)
	}
	where := callerOutside()
	for _, c := range s.cases {
		t.Run(c.name, func(t *testing.T) {
			timeout := caseTimeout
			if d, ok := t.Deadline(); ok {
				timeout = min(timeout, max(time.Until(d)-2*stopGrace, time.Second))
			}
			o := s.runCase(c, nonNil(func() (X, error) { return newX(t), nil }), timeout, where)
			switch {
			case errors.Is(o.err, errNilComponent):
				t.Fatal(o.err)
			case o.err != nil:
				t.Error(o.err)
			case o.skip != "":
				t.Skip(o.skip)
			}
		})
	}
}

// runCheck runs every case and joins what they found.
func (s suite[X]) runCheck(newX func() (X, error)) error {
	if newX == nil {
		return errNilConstructor
	}
	var errs []error
	for _, o := range s.run(newX, callerOutside()) {
		errs = append(errs, o.err) // errors.Join drops the nils
	}
	return errors.Join(errs...)
}

// run runs every case and returns each one's outcome.
func (s suite[X]) run(newX func() (X, error), where string) []outcome {
	out := make([]outcome, 0, len(s.cases))
	for _, c := range s.cases {
		o := s.runCase(c, nonNil(newX), caseTimeout, where)
		out = append(out, o)
		if errors.Is(o.err, errNilComponent) {
			break // every case would say the same
		}
	}
	return out
}

// runCase runs one case on fresh instances under the watchdog. The case runs
// on a goroutine of its own; this goroutine builds the instances (a test's
// constructor may call t.Fatal, which must happen on the test's goroutine)
// and waits. When the watchdog fires it closes the instances to release
// goroutines blocked in them and waits for the case to return; only a case
// that has returned gets its instances freed (a mapping it may still touch
// is never unmapped under it).
func (s suite[X]) runCase(c testCase[X], build func() (X, error), timeout time.Duration, where string) outcome {
	if c.whole {
		measuring.Lock()
		defer measuring.Unlock()
	} else {
		measuring.RLock()
		defer measuring.RUnlock()
	}
	o := outcome{name: c.name}
	first, err := build()
	if err != nil {
		o.err = fmt.Errorf("%s: %w", c.name, &ctorError{err})
		return o
	}
	insts := []X{first}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	r := &run[X]{ctx: ctx, x: first, reqs: make(chan chan built[X]), light: s.light}
	done := make(chan error, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				done <- caught(p)
			}
		}()
		done <- c.run(r)
	}()
	returned, stuck := false, false
	// abort closes the instances and gives the case 2*stopGrace to return;
	// it returns what the case returned, if it did.
	abort := func() (found error) {
		cancel()
		for _, x := range insts {
			safely(func() { s.abort(x) })
		}
		select {
		case found = <-done:
			returned = true
		case <-time.After(2 * stopGrace):
		}
		return found
	}
	defer func() {
		// Also reached when a constructor ends the test with t.Fatal.
		if !returned && !stuck {
			abort()
		}
		if returned {
			for _, x := range insts {
				safely(func() { s.release(x) })
			}
		}
	}()
	var found error
wait:
	for {
		select {
		case found = <-done:
			returned = true
			break wait
		case req := <-r.reqs:
			x, err := build()
			if err == nil {
				insts = append(insts, x)
			}
			req <- built[X]{x, err}
		case <-ctx.Done():
			found = abort()
			if !errors.Is(found, ErrDeadlock) {
				// Whatever else the case saw was caused by the abort.
				found = violationf(ErrDeadlock, "did not finish within %v", timeout)
			}
			if !returned {
				stuck = true
				found = fmt.Errorf("%w; the case is still blocked in a call into the component after it was closed, and its instances were left unreleased", found)
			}
			break wait
		}
	}
	var sk *skipped
	var ce *ctorError
	switch {
	case found == nil:
	case errors.As(found, &sk):
		o.skip = sk.reason
	case errors.As(found, &ce):
		o.err = fmt.Errorf("%s: %w", c.name, ce)
	default:
		o.err = &Violation{Case: c.name, Explanation: c.explanation, Caller: where, Err: found}
	}
	return o
}

// safely calls f, ignoring a panic: closing an instance that a case has
// closed already must not take the suite down (CloseTwice reports it).
func safely(f func()) {
	defer func() { _ = recover() }()
	f()
}

// thisPackage is the import path of this package plus a dot: the prefix of
// the names of its functions.
var thisPackage = func() string {
	pc, _, _, _ := runtime.Caller(0)
	name := runtime.FuncForPC(pc).Name()
	slash := strings.LastIndex(name, "/")
	return name[:slash+strings.Index(name[slash:], ".")+1]
}()

// callerOutside returns the file:line of the innermost caller outside this
// package's library code: where the user called the suite.
func callerOutside() string {
	pcs := make([]uintptr, 32)
	frames := runtime.CallersFrames(pcs[:runtime.Callers(2, pcs)])
	for {
		f, more := frames.Next()
		if !strings.HasPrefix(f.Function, thisPackage) || strings.HasSuffix(f.File, "_test.go") {
			return fmt.Sprintf("%s:%d", f.File, f.Line)
		}
		if !more {
			return ""
		}
	}
}

// crew runs a case's helper goroutines (producers, workers, scrapers). It
// turns their panics into violations, keeps the first error, and lets the
// owner wait for them without ever waiting past the watchdog.
type crew struct {
	wg      sync.WaitGroup
	running atomic.Int64
	mu      sync.Mutex
	err     error
}

// Go runs f on a goroutine of the crew.
func (c *crew) Go(f func() error) {
	c.running.Add(1)
	c.wg.Go(func() {
		defer c.running.Add(-1)
		defer func() {
			if p := recover(); p != nil {
				c.fail(caught(p))
			}
		}()
		if err := f(); err != nil {
			c.fail(err)
		}
	})
}

// fail records err unless an error was recorded already.
func (c *crew) fail(err error) {
	c.mu.Lock()
	if c.err == nil {
		c.err = err
	}
	c.mu.Unlock()
}

// first returns the first error recorded.
func (c *crew) first() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// finished reports whether every goroutine of the crew has returned.
func (c *crew) finished() bool { return c.running.Load() == 0 }

// wait waits for the crew and returns its first error. If ctx ends first
// (the watchdog fired and closed the instance), it gives the crew stopGrace
// to notice and returns a deadlock violation naming what was blocked.
func (c *crew) wait(ctx context.Context, what string) error {
	var b backoff
	for !c.finished() {
		if !b.wait(ctx) {
			return c.stopped(what)
		}
	}
	c.wg.Wait()
	return c.first()
}

// drainOut waits for the crew while the owner drains: a worker blocked on a
// full bounded transport needs the owner to make room.
func (c *crew) drainOut(ctx context.Context, drain func() (int, error)) error {
	var b backoff
	for !c.finished() {
		if n, _ := drain(); n > 0 {
			b.reset()
		} else if !b.wait(ctx) {
			return c.stopped("workers were")
		}
	}
	return c.wait(ctx, "workers")
}

// drainSending runs send on a goroutine of its own while the owner keeps
// draining, as a bounded transport needs: until send returns, or, with
// dry, until a Drain that started after send returned brings nothing. It
// returns how many blocks the drains freed and the errors they reported.
func drainSending(ctx context.Context, drain func() (int, error), dry bool, send func() error) (int, []error, error) {
	var c crew
	c.Go(send)
	got := 0
	var reports []error
	var b backoff
	for {
		done := c.finished() // before the drain
		if done && !dry {
			return got, reports, c.wait(ctx, "senders")
		}
		n, err := drain()
		got += n
		if err != nil {
			reports = append(reports, err)
		}
		switch {
		case n > 0 || err != nil:
			b.reset()
		case done:
			return got, reports, c.wait(ctx, "senders")
		case !b.wait(ctx):
			return got, reports, c.stopped("senders were")
		}
	}
}

// stopped waits up to stopGrace for a crew whose case was stopped by its
// watchdog and returns the deadlock violation to report.
func (c *crew) stopped(what string) error {
	blocked := c.running.Load()
	deadline := time.Now().Add(stopGrace)
	for !c.finished() && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if c.finished() {
		return violationf(ErrDeadlock, "%d %s blocked until the watchdog closed the instance", blocked, what)
	}
	return violationf(ErrDeadlock, "%d %s blocked, %d still blocked after the instance was closed", blocked, what, c.running.Load())
}

// backoff paces a goroutine that waits for others. It yields for up to a
// couple of milliseconds (a sleep takes a millisecond or more on Linux,
// far longer than the wake-up the waiter usually waits for), then sleeps,
// doubling up to a few milliseconds, so that a waiting owner neither slows
// a fast exchange down nor burns a core for long. In a testing/synctest
// bubble, where time stands still while anything runs and a sleep ends as
// soon as every goroutine is blocked, it sleeps at once.
type backoff struct {
	n     int
	start time.Time
}

// The yield phase: at most spinYields yields, for at most spinTime.
const (
	spinYields = 20000
	spinTime   = 2 * time.Millisecond
)

// wait waits a little and reports whether ctx is still live.
func (b *backoff) wait(ctx context.Context) bool {
	if ctx.Err() != nil {
		return false
	}
	if b.n == 0 {
		b.start = time.Now()
	}
	b.n++
	if b.n&63 == 0 && b.n < spinYields {
		switch elapsed := time.Since(b.start); {
		case elapsed == 0:
			// Time stands still while this goroutine runs: a synctest
			// bubble, where sleeping costs nothing.
			b.n = spinYields
		case elapsed >= spinTime:
			b.n = spinYields
		}
	}
	if b.n < spinYields {
		runtime.Gosched()
		return true
	}
	d := 50 * time.Microsecond << min(b.n-spinYields, 6) // up to 3.2 ms
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// reset is called on progress.
func (b *backoff) reset() { b.n = 0 }
