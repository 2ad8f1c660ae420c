package mailbox_test

import (
	"testing"

	"github.com/locus-go/locus/pool"
	"github.com/locus-go/locus/transport/internal/transporttest"
	"github.com/locus-go/locus/transport/mailbox"
)

// TestUnusable: the methods of a nil Transport and of a nil or zero Producer
// return an error or do nothing; none panics. (The zero Transport is ready
// to use: TestZeroValueIsReady.)
func TestUnusable(t *testing.T) {
	t.Run("Transport/nil", func(t *testing.T) {

		if err := transporttest.Unusable((*mailbox.Transport)(nil), pool.ErrInvalidConfig); err != nil {
			t.Fatal(err)
		}
	})
	for _, c := range []struct {
		name string
		p    *mailbox.Producer
	}{{"nil", nil}, {"zero", new(mailbox.Producer)}} {
		t.Run("Producer/"+c.name, func(t *testing.T) {
			if err := transporttest.UnusableProducer(c.p); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestReentrantDrain: a Drain called from inside the sink does nothing.
func TestReentrantDrain(t *testing.T) {
	if err := transporttest.ReentrantDrain(subject); err != nil {
		t.Fatal(err)
	}
}

// TestNilSink: Drain(nil) takes nothing; the next Drain delivers it all.
func TestNilSink(t *testing.T) {
	if err := transporttest.NilSink(subject); err != nil {
		t.Fatal(err)
	}
}
