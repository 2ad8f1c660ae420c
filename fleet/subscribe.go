package fleet

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/locus-go/locus/kv/events"
)

// PodOf splits a topic llm-d's indexer parses, "kv@<pod>@<model>"
// (events.Topic), into its pod and model; ok is false for any other
// topic (no "kv@" prefix, an empty pod).
func PodOf(topic string) (pod, model string, ok bool) {
	rest, found := strings.CutPrefix(topic, "kv@")
	if !found {
		return "", "", false
	}
	pod, model, found = strings.Cut(rest, "@")
	if !found || pod == "" {
		return "", "", false
	}
	return pod, model, true
}

// ApplyDecoded applies one event of pod, as a subscriber decoded it from
// the wire (events.Decode), with the same semantics as Apply: an event
// with the same hashes, kind, medium and tokens gives the same index
// (blocks are keyed by their 64-bit form, which both forms of a wire hash
// carry). Its errors are Apply's.
func (x *Index) ApplyDecoded(pod string, ev *events.Event) error {
	if x == nil || x.blocks == nil {
		return fmt.Errorf("%w: nil or zero index", ErrInvalidConfig)
	}
	if pod == "" {
		return fmt.Errorf("%w: empty pod name", ErrInvalidPod)
	}
	if ev == nil {
		return fmt.Errorf("%w: nil", ErrInvalidEvent)
	}
	return applyEvent(x, pod, ev.Kind, ev.Medium, ev.Parent.Uint64(), ev.Hashes, len(ev.Tokens) > 0)
}

// ApplyBatch applies a decoded batch of pod: it clears the pod first when
// the batch starts a new stream (Batch.Restarted: the engine restarted
// over an empty cache), then applies every event (ApplyDecoded). It fails
// with ErrInvalidPod for an empty pod and ErrInvalidEvent for a nil batch
// or an event of an unknown kind (the events before it are applied).
func (x *Index) ApplyBatch(pod string, b *events.Batch) error {
	if x == nil || x.blocks == nil {
		return fmt.Errorf("%w: nil or zero index", ErrInvalidConfig)
	}
	if pod == "" {
		return fmt.Errorf("%w: empty pod name", ErrInvalidPod)
	}
	if b == nil {
		return fmt.Errorf("%w: nil batch", ErrInvalidEvent)
	}
	if b.Restarted {
		x.Clear(pod)
	}
	for i := range b.Events {
		if err := x.ApplyDecoded(pod, &b.Events[i]); err != nil {
			return err
		}
	}
	return nil
}

// Follower applies an engine's event stream, read from its kv/events
// publisher over ZMQ, to an Index. Make one with Follow.
type Follower struct {
	sub                *events.Subscription
	batches, events    atomic.Uint64
	skipped, malformed atomic.Uint64
}

// FollowerStats counts what a Follower applied.
type FollowerStats struct {
	// Batches and Events count what was applied.
	Batches, Events uint64
	// Skipped counts the batches whose topic names no pod (PodOf), not
	// applied; Invalid the events Apply refused.
	Skipped, Invalid uint64
	// Subscription is the subscription's own counts: gaps, replays,
	// batches missed, restarts, connections.
	Subscription events.SubscriptionStats
}

// Follow subscribes to a publisher's endpoint (events.Subscribe, with
// opts: give events.WithReplayFrom the engine's replay socket so that
// gaps are filled) and applies every batch to x as the pod its topic
// names ("kv@<pod>@<model>", events.Topic), on the subscription's
// goroutine: a batch of a restarted engine clears the pod first
// (ApplyBatch). Use it in a router process in front of engines that
// publish with kv/events (or vLLM's publisher); in the engines' own
// process use Index.Subscriber instead, without a socket. It fails with
// ErrInvalidConfig for a nil index, and with events.Subscribe's errors.
//
// To know when the index has caught up with an engine, compare
// Stats().Subscription.Next with the publisher's sequence numbers.
func Follow(ctx context.Context, x *Index, endpoint string, opts ...events.SubscribeOption) (*Follower, error) {
	if x == nil || x.blocks == nil {
		return nil, fmt.Errorf("%w: nil or zero index", ErrInvalidConfig)
	}
	f := new(Follower)
	sub, err := events.Subscribe(ctx, endpoint, func(b *events.Batch) {
		pod, _, ok := PodOf(b.Topic)
		if !ok {
			f.skipped.Add(1)
			return
		}
		if b.Restarted {
			x.Clear(pod)
		}
		for i := range b.Events {
			if x.ApplyDecoded(pod, &b.Events[i]) != nil {
				f.malformed.Add(1)
			}
		}
		f.events.Add(uint64(len(b.Events)))
		f.batches.Add(1)
	}, opts...)
	if err != nil {
		return nil, err
	}
	f.sub = sub
	return f, nil
}

// Stats returns the follower's counts. Any goroutine may call it.
func (f *Follower) Stats() FollowerStats {
	if f == nil {
		return FollowerStats{}
	}
	return FollowerStats{Batches: f.batches.Load(), Events: f.events.Load(), Skipped: f.skipped.Load(),
		Invalid: f.malformed.Load(), Subscription: f.sub.Stats()}
}

// Close stops following: it closes the subscription (events.Subscription.Close).
func (f *Follower) Close() error {
	if f == nil {
		return fmt.Errorf("%w: nil follower", ErrInvalidConfig)
	}
	return f.sub.Close()
}
