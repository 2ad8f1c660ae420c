package conformance

import (
	"errors"
	"testing"

	"github.com/locus-go/locus/backing/heap"
	"github.com/locus-go/locus/backing/mmap"
	"github.com/locus-go/locus/classes"
	"github.com/locus-go/locus/policy/fifo"
	"github.com/locus-go/locus/policy/lifo"
	"github.com/locus-go/locus/pool"
	"github.com/locus-go/locus/transport/mailbox"
	"github.com/locus-go/locus/transport/sharded"
)

// The size classes of package classes pass every case of the size-class
// suite, over the Go heap and over mapped memory; broken_classes_test.go
// checks that broken allocators fail.

// suiteClasses are three classes, so that every class has a neighbour on
// each side but the first and the last.
var suiteClasses = []classes.Class{{Size: 64, Blocks: 16}, {Size: 256, Blocks: 12}, {Size: 1024, Blocks: 8}}

// realClasses returns a constructor of classes.Pools of suiteClasses whose
// classes newBacking and newTransport build.
func realClasses[B pool.Backing, T pool.Transport, P pool.ReusePolicy](newBacking func(size, n int) (B, error), newTransport func() (T, error), policy P) func() (clsSubject, error) {
	return func() (clsSubject, error) {
		c, err := classes.New(suiteClasses, func(cl classes.Class) (B, T, P, error) {
			var t T
			b, err := newBacking(cl.Size, cl.Blocks)
			if err != nil {
				return b, t, policy, err
			}
			t, err = newTransport()
			return b, t, policy, err
		})
		if err != nil {
			return nil, err
		}
		return clsAdapter[*classes.Sender]{c}, nil
	}
}

// mmapOrSkip skips t where no mapped backing can be made.
func mmapOrSkip(t *testing.T) {
	t.Helper()
	b, err := mmap.New(4096, 1)
	if err != nil {
		if errors.Is(err, errors.ErrUnsupported) {
			t.Skipf("no mapped backing here: %v", err)
		}
		t.Fatal(err)
	}
	_ = b.Close()
}

func newMailbox() (*mailbox.Transport, error) { return mailbox.New(), nil }

func TestInTreeClasses(t *testing.T) {
	t.Run("default", func(t *testing.T) {
		wantOutcomes(t, classesSuite().run(func() (clsSubject, error) {
			c, err := classes.Default(suiteClasses)
			if err != nil {
				return nil, err
			}
			return clsAdapter[*classes.Sender]{c}, nil
		}, "classes_test.go"))
	})
	t.Run("heap/sharded tiny/fifo", func(t *testing.T) {
		wantOutcomes(t, classesSuite().run(realClasses(heap.New, func() (*sharded.Transport, error) {
			return sharded.New(sharded.WithCapacity(2), sharded.WithBatch(1))
		}, fifo.Policy{}), "classes_test.go"))
	})
	t.Run("mmap/mailbox/lifo", func(t *testing.T) {
		mmapOrSkip(t)
		newMmap := func(size, n int) (*mmap.Backing, error) { return mmap.New(size, n) }
		wantOutcomes(t, classesSuite().run(realClasses(newMmap, newMailbox, lifo.Policy{}), "classes_test.go"))
	})
}

// The public drivers run every case as a subtest.
func TestClassesDrivers(t *testing.T) {
	TestClasses(t, func(t *testing.T) *classes.DefaultPool {
		c, err := classes.Default(suiteClasses)
		if err != nil {
			t.Fatal(err)
		}
		return c
	})
	if err := CheckClasses(func() (*classes.DefaultPool, error) { return classes.Default(suiteClasses) }); err != nil {
		t.Error(err)
	}
}
