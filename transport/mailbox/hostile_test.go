package mailbox_test

import (
	"testing"

	"github.com/locus-go/locus/pool"
	"github.com/locus-go/locus/transport/internal/transporttest"
	"github.com/locus-go/locus/transport/mailbox"
)

// gap skips a check that mailbox.go does not pass yet, naming the change it
// needs. Remove the call with the change.
func gap(t *testing.T, change string) {
	t.Helper()
	t.Skip("mailbox.go needs: " + change)
}

// TestUnusable: the methods of a nil Transport and of a nil or zero Producer
// return an error or do nothing; none panics. (The zero Transport is ready
// to use: TestZeroValueIsReady.)
func TestUnusable(t *testing.T) {
	t.Run("Transport/nil", func(t *testing.T) {
		gap(t, "nil-receiver checks in NewProducer (an error), Drain and Close (do nothing)")
		if err := transporttest.Unusable((*mailbox.Transport)(nil), pool.ErrInvalidConfig); err != nil {
			t.Fatal(err)
		}
	})
	for _, c := range []struct {
		name string
		p    *mailbox.Producer
	}{{"nil", nil}, {"zero", new(mailbox.Producer)}} {
		t.Run("Producer/"+c.name, func(t *testing.T) {
			gap(t, "Send of a nil or zero Producer to fail with an error wrapping pool.ErrClosed, its Close to do nothing")
			if err := transporttest.UnusableProducer(c.p); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestNilSink: Drain(nil) takes nothing; the next Drain delivers it all.
func TestNilSink(t *testing.T) {
	gap(t, "Drain(nil) to return at once (today it takes the chunks and panics in Sink.Put)")
	if err := transporttest.NilSink(subject); err != nil {
		t.Fatal(err)
	}
}
