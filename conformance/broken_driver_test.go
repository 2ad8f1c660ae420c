package conformance

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

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

// catches returns found with each case named catching the component with a
// violation of kind k.
func catches(k error, cases ...string) found { return found{}.and(k, cases...) }

// and adds cases that catch the component with a violation of kind k.
func (f found) and(k error, cases ...string) found {
	for _, c := range cases {
		f[c] = k
	}
	return f
}

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
	// outsideBubble runs the component outside a testing/synctest bubble
	// (one that never blocks would stop the bubble's clock).
	outsideBubble bool
}

func transports(ctor func() (pool.Transport, error), free func()) func() ([]outcome, func()) {
	return func() ([]outcome, func()) { return transportSuite().lite().run(ctor, "broken_test.go"), free }
}

func ref(bd pool.Bounds, d defect) func() ([]outcome, func()) {
	return func() ([]outcome, func()) {
		ctor, free := newRef(bd, d)
		return transportSuite().lite().run(ctor, "broken_test.go"), free
	}
}

func backings(ctor func() (pool.Backing, error)) func() ([]outcome, func()) {
	return func() ([]outcome, func()) { return backingSuite().lite().run(ctor, "broken_test.go"), nil }
}

func policies(ctor func() (pool.ReusePolicy, error)) func() ([]outcome, func()) {
	return func() ([]outcome, func()) { return policySuite().lite().run(ctor, "broken_test.go"), nil }
}

func pools(ctor func() (subject, error)) func() ([]outcome, func()) {
	return func() ([]outcome, func()) { return poolSuite().lite().run(ctor, "broken_test.go"), nil }
}

// rejectsBroken checks that each component is rejected by exactly the cases
// it lists, each with the kind of violation listed. With parallel the
// components run side by side; without, one after another (the classes and
// pages components each take a few milliseconds alone, and their
// allocation cases stop the world of every bubble running beside them).
func rejectsBroken(t *testing.T, comps []brokenComponent, parallel bool) {
	for _, c := range comps {
		t.Run(c.name, func(t *testing.T) {
			if parallel {
				t.Parallel()
			}
			if race.Enabled && c.onlyWithoutRace != "" {
				t.Skip(c.onlyWithoutRace)
			}
			bubble := synctest.Test
			if c.outsideBubble {
				bubble = func(t *testing.T, f func(*testing.T)) { f(t) }
			}
			bubble(t, func(t *testing.T) {
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
				if w, ok := underRace[c.name]; ok && race.Enabled {
					want = w
				} else if race.Enabled {
					delete(want, "ZeroAllocs") // skipped: the race runtime allocates
				}
				if !maps.Equal(got, want) {
					var msgs []string
					for _, o := range outs {
						if o.err != nil {
							msgs = append(msgs, o.err.Error())
						}
					}
					t.Errorf("component %q:\ngot  %v\nwant %v\n%s", c.name, got, want, strings.Join(msgs, "\n"))
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
