package transporttest

import (
	"errors"
	"fmt"
	"runtime"

	"github.com/locus-go/locus/pool"
)

// call runs f and turns a panic into an error naming the call.
func call(name string, f func() error) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("%s panicked: %v", name, v)
		}
	}()
	if err := f(); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

// Unusable checks every method of a transport that cannot make producers
// (a nil or zero one): NewProducer fails with an error matching wantNew
// before Close and pool.ErrClosed-or-wantNew after, Drain delivers nothing
// (also with a nil sink), Close returns nil, twice, and a bounded
// transport's Bounds are zero. Nothing may panic.
func Unusable(tr pool.Transport, wantNew error) error {
	r := NewRecorder()
	return errors.Join(
		call("NewProducer", func() error {
			if p, err := tr.NewProducer(); p != nil || !errors.Is(err, wantNew) {
				return fmt.Errorf("= (%v, %v), want (nil, an error matching %v)", p, err, wantNew)
			}
			return nil
		}),
		call("Drain", func() error {
			tr.Drain(r.Sink)
			tr.Drain(nil)
			if len(r.Got) != 0 {
				return fmt.Errorf("delivered %v", r.Got)
			}
			return nil
		}),
		call("Bounds", func() error {
			if b, ok := tr.(pool.BoundedTransport); ok && b.Bounds() != (pool.Bounds{}) {
				return fmt.Errorf("= %+v, want zero Bounds", b.Bounds())
			}
			return nil
		}),
		call("Close", func() error {
			if err := errors.Join(tr.Close(), tr.Close()); err != nil {
				return err
			}
			if p, err := tr.NewProducer(); p != nil || (!errors.Is(err, pool.ErrClosed) && !errors.Is(err, wantNew)) {
				return fmt.Errorf("then NewProducer = (%v, %v), want (nil, an error)", p, err)
			}
			return nil
		}),
	)
}

// UnusableProducer checks every method of a producer that cannot send (a
// nil or zero one): Send, Send(nil) and TrySend fail with an error wrapping
// pool.ErrClosed and take nothing, and Close returns nil, twice. Nothing may
// panic.
func UnusableProducer(p pool.Producer) error {
	errs := []error{
		call("Send", func() error {
			if err := p.Send(Seq(0, 0, 2)); !errors.Is(err, pool.ErrClosed) {
				return fmt.Errorf("= %v, want an error wrapping pool.ErrClosed", err)
			}
			return nil
		}),
		call("Send(nil)", func() error {
			if err := p.Send(nil); !errors.Is(err, pool.ErrClosed) {
				return fmt.Errorf("= %v, want an error wrapping pool.ErrClosed", err)
			}
			return nil
		}),
		call("Close", func() error { return errors.Join(p.Close(), p.Close()) }),
	}
	if tp, ok := p.(pool.TryProducer); ok {
		errs = append(errs, call("TrySend", func() error {
			if n, err := tp.TrySend(Seq(0, 0, 2)); n != 0 || !errors.Is(err, pool.ErrClosed) {
				return fmt.Errorf("= (%d, %v), want (0, an error wrapping pool.ErrClosed)", n, err)
			}
			return nil
		}))
	}
	return errors.Join(errs...)
}

// NilSink checks that Drain(nil) takes nothing: what was sent is delivered
// by the next Drain with a sink, exactly once.
func NilSink(s Subject) error {
	return s.withProducer(func(tr pool.Transport, prod pool.Producer) error {
		hs := Seq(0, 0, min(3, bounds(tr).Capacity))
		if err := prod.Send(hs); err != nil {
			return err
		}
		if err := call("Drain(nil)", func() error { tr.Drain(nil); return nil }); err != nil {
			return err
		}
		r := NewRecorder()
		for r.Drain(tr) > 0 {
		}
		return r.Want(hs)
	})
}

// Allocs returns how many heap allocations one call of f makes, measured
// like testing.AllocsPerRun (with GOMAXPROCS at 1) but without its warm-up
// call, for operations that cannot be repeated.
func Allocs(f func()) uint64 {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.Mallocs - before.Mallocs
}

// ForgetAllocs sends through producers producers, closes them and returns
// how many allocations the Drain that takes their items and forgets them
// makes. The subject's batch must cover what each sent (one handle).
func ForgetAllocs(s Subject, producers int) (uint64, error) {
	tr, err := s.make()
	if err != nil {
		return 0, err
	}
	defer tr.Close()
	for p := range producers {
		prod, err := tr.NewProducer()
		if err != nil {
			return 0, err
		}
		if err := prod.Send(Seq(p, 0, 1)); err != nil {
			return 0, err
		}
		if err := prod.Close(); err != nil {
			return 0, err
		}
	}
	discard := pool.NewSink(func([]pool.Handle) {})
	n := Allocs(func() { tr.Drain(discard) })
	if s.Queues != nil && s.Queues(tr) != 0 {
		return n, fmt.Errorf("%d queues kept after the drain, want 0", s.Queues(tr))
	}
	return n, nil
}
