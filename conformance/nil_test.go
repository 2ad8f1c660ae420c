package conformance_test

import (
	"strings"
	"testing"

	"github.com/locus-go/locus/backing/heap"
	"github.com/locus-go/locus/classes"
	"github.com/locus-go/locus/conformance"
	"github.com/locus-go/locus/pages"
	"github.com/locus-go/locus/policy/lifo"
	"github.com/locus-go/locus/pool"
	"github.com/locus-go/locus/tier"
	"github.com/locus-go/locus/transport/mailbox"
)

// A nil constructor, or one that returns a nil component, is one error
// naming it, not a panic or a stack trace per case.
func TestNilComponents(t *testing.T) {
	for name, err := range map[string]error{
		"nil transport constructor": conformance.CheckTransport(nil),
		"nil backing constructor":   conformance.CheckBacking(nil),
		"nil transport":             conformance.CheckTransport(func() (pool.Transport, error) { return nil, nil }),
		"typed nil transport":       conformance.CheckTransport(func() (pool.Transport, error) { return (*mailbox.Transport)(nil), nil }),
		"nil backing":               conformance.CheckBacking(func() (pool.Backing, error) { return (*heap.Backing)(nil), nil }),
		"nil policy":                conformance.CheckPolicy(func() (pool.ReusePolicy, error) { return nil, nil }),
		"nil pool": conformance.CheckPool(func() (*pool.Pool[*heap.Backing, *mailbox.Transport, lifo.Policy], error) {
			return nil, nil
		}),
		"nil pool constructor":    conformance.CheckPool[*heap.Backing, *mailbox.Transport, lifo.Policy](nil),
		"nil classes":             conformance.CheckClasses(func() (*classes.DefaultPool, error) { return nil, nil }),
		"nil classes constructor": conformance.CheckClasses[*classes.DefaultPool](nil),
		"nil pages":               conformance.CheckPages(func(conformance.PagesConfig) (*pages.Pool, error) { return nil, nil }),
		"nil pages constructor":   conformance.CheckPages[*pages.Pool](nil),
		"nil tier":                conformance.CheckTier(func() (*tier.Manager, error) { return nil, nil }),
		"nil tier constructor":    conformance.CheckTier[*tier.Manager](nil),
	} {
		if err == nil {
			t.Errorf("%s: accepted", name)
			continue
		}
		if msg := err.Error(); strings.Count(msg, "nil") == 0 || strings.Contains(msg, "goroutine ") || strings.Count(msg, "\n") > 2 {
			t.Errorf("%s: want one line naming the nil, got:\n%s", name, msg)
		}
	}
}
