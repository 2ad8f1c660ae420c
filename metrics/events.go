package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/locus-go/locus/kv/events"
)

// PublisherSource is what NewPublisher reads: *events.Publisher is one.
type PublisherSource interface {
	Snapshot() events.Stats
}

// NewPublisher returns a collector of a KV event publisher's counts,
// labelled publisher=name. Every scrape reads p.Snapshot once. A nil p
// makes a collector whose registration fails.
//
// Its metrics:
//
//	locus_kv_events_batches_total                 counter: batches sealed (sequence numbers used)
//	locus_kv_events_published_batches_total       counter: batches written to the socket
//	locus_kv_events_published_events_total        counter
//	locus_kv_events_dropped_batches_total{reason="buffer_full"|"send_error"}  counter
//	locus_kv_events_dropped_events_total          counter: events not published, in dropped batches or after Close
//	locus_kv_events_invalid_events_total          counter: nil events and events of unknown kinds
//	locus_kv_events_queued_batches                gauge: batches waiting for the publisher's goroutine
//	locus_kv_events_delivered_batches_total       counter: batch copies written to subscribers
//	locus_kv_events_undelivered_batches_total     counter: batch copies a subscriber did not get (its own queue full, its connection lost, or left at Close)
//	locus_kv_events_unheard_batches_total         counter: batches no subscriber's subscription covered (before the first subscriber)
//	locus_kv_events_subscribers                   gauge: subscribers connected now
//	locus_kv_events_subscriber_disconnects_total{reason="left"|"timed_out"}  counter
//	locus_kv_events_replay_requests_total{result="served"|"invalid"}  counter
//
// A subscriber sees a gap in the sequence numbers for every dropped batch.
func NewPublisher(name string, p PublisherSource) prometheus.Collector {
	return newCollector[events.Stats]("kv_events", "publisher", name, p, publisherFamilies)
}

var publisherFamilies = []family[events.Stats]{
	{"batches_total", "Batches sealed: the sequence numbers used.", nil,
		func(w *writer, s events.Stats) { w.counter(s.Batches) }},
	{"published_batches_total", "Batches written to the socket.", nil,
		func(w *writer, s events.Stats) { w.counter(s.Published) }},
	{"published_events_total", "Events in the batches written to the socket.", nil,
		func(w *writer, s events.Stats) { w.counter(s.PublishedEvents) }},
	{"dropped_batches_total", "Batches lost: dropped because the queue was full, or refused by the socket.", []string{"reason"},
		func(w *writer, s events.Stats) {
			w.counter(s.Dropped, "buffer_full")
			w.counter(s.Failed, "send_error")
		}},
	{"dropped_events_total", "Events not published: in lost batches, or received after Close.", nil,
		func(w *writer, s events.Stats) { w.counter(s.DroppedEvents) }},
	{"invalid_events_total", "Nil events and events of unknown kinds, ignored.", nil,
		func(w *writer, s events.Stats) { w.counter(s.Invalid) }},
	{"queued_batches", "Sealed batches waiting for the publisher's goroutine.", nil,
		func(w *writer, s events.Stats) { w.gauge(float64(s.Queued)) }},
	{"delivered_batches_total", "Batch copies written to subscribers' connections, over all subscribers.", nil,
		func(w *writer, s events.Stats) { w.counter(s.Delivered) }},
	{"undelivered_batches_total", "Batch copies a subscriber did not get: its own queue full, its connection lost, or still queued when Close gave up.", nil,
		func(w *writer, s events.Stats) { w.counter(s.Undelivered) }},
	{"unheard_batches_total", "Published batches no subscriber's subscription covered (before the first subscriber connected).", nil,
		func(w *writer, s events.Stats) { w.counter(s.Unheard) }},
	{"subscribers", "Subscribers connected now.", nil,
		func(w *writer, s events.Stats) { w.gauge(float64(s.Subscribers)) }},
	{"subscriber_disconnects_total", "Subscriber connections lost; timed_out: cut after the write timeout (those are not counted in left).", []string{"reason"},
		func(w *writer, s events.Stats) {
			w.counter(s.Left-min(s.Left, s.TimedOut), "left")
			w.counter(s.TimedOut, "timed_out")
		}},
	{"replay_requests_total", "Replay requests: served, or malformed and ignored.", []string{"result"},
		func(w *writer, s events.Stats) {
			w.counter(s.ReplayRequests, "served")
			w.counter(s.ReplayInvalid, "invalid")
		}},
}
