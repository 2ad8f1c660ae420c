package events

import (
	"time"

	"github.com/go-zeromq/zmq4"

	"github.com/locus-go/locus/kv"
)

// WithHold makes the publisher's goroutine wait until hold is closed before
// it takes anything from the queue: a publisher that has fallen behind.
func WithHold(hold chan struct{}) Option { return optionFunc(func(c *config) { c.hold = hold }) }

// WithSendBuffer sets the kernel send buffer of each subscriber's
// connection, so that a subscriber that stops reading blocks the writer
// after a few KiB rather than MiB.
func WithSendBuffer(bytes int) Option { return optionFunc(func(c *config) { c.sendBuf = bytes }) }

// Subscribed reports whether a connected subscriber covers p's topic.
func Subscribed(p *Publisher) bool { return p.subscribed() }

// Encode returns the message of one batch of events, numbered seq and
// sealed at ts, as the publisher would send it.
func Encode(seq uint64, ts time.Time, evs []kv.Event, opts ...Option) (zmq4.Msg, error) {
	cfg := defaults()
	for _, o := range opts {
		o.apply(&cfg)
	}
	if err := cfg.validate(); err != nil {
		return zmq4.Msg{}, err
	}
	b := &batch{seq: seq, ts: ts}
	for i := range evs {
		b.add(&evs[i])
	}
	e := newEncoder(&cfg)
	return e.message(b), nil
}
