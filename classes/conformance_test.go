package classes_test

import (
	"errors"
	"testing"

	"github.com/locus-go/locus/backing/heap"
	"github.com/locus-go/locus/backing/mmap"
	"github.com/locus-go/locus/classes"
	"github.com/locus-go/locus/conformance"
	"github.com/locus-go/locus/policy/fifo"
	"github.com/locus-go/locus/transport/mailbox"
	"github.com/locus-go/locus/transport/sharded"
)

var testClasses = []classes.Class{{Size: 64, Blocks: 16}, {Size: 256, Blocks: 12}, {Size: 1024, Blocks: 8}}

// TestConformance runs the public size-class suite over classes.Pool: the
// default composition, mapped backings with FIFO reuse, and a bounded
// transport.
func TestConformance(t *testing.T) {
	t.Run("default", func(t *testing.T) {
		conformance.TestClasses(t, func(t *testing.T) *classes.DefaultPool {
			c, err := classes.Default(testClasses)
			if err != nil {
				t.Fatal(err)
			}
			return c
		})
	})
	t.Run("backing=mmap", func(t *testing.T) {
		if _, err := mmap.New(64, 1); errors.Is(err, errors.ErrUnsupported) {
			t.Skip(err)
		}
		conformance.TestClasses(t, func(t *testing.T) *classes.Pool[*mmap.Backing, *mailbox.Transport, fifo.Policy] {
			c, err := classes.New(testClasses, func(c classes.Class) (*mmap.Backing, *mailbox.Transport, fifo.Policy, error) {
				b, err := mmap.New(c.Size, c.Blocks)
				return b, mailbox.New(), fifo.Policy{}, err
			})
			if err != nil {
				t.Fatal(err)
			}
			return c
		})
	})
	t.Run("transport=sharded", func(t *testing.T) {
		conformance.TestClasses(t, func(t *testing.T) *classes.Pool[*heap.Backing, *sharded.Transport, fifo.Policy] {
			c, err := classes.New(testClasses, func(c classes.Class) (*heap.Backing, *sharded.Transport, fifo.Policy, error) {
				b, err := heap.New(c.Size, c.Blocks)
				if err != nil {
					return nil, nil, fifo.Policy{}, err
				}
				tr, err := sharded.New()
				return b, tr, fifo.Policy{}, err
			})
			if err != nil {
				t.Fatal(err)
			}
			return c
		})
	})
}
