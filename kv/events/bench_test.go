package events_test

import (
	"testing"

	"github.com/locus-go/locus/kv"
	"github.com/locus-go/locus/kv/events"
)

// BenchmarkSubscriber is the owner's cost of one event: a BlockStored of
// one 16-token block, copied into the current batch, with the publisher's
// goroutine encoding and sending the full batches beside it (no subscriber
// is connected, so the socket discards them).
func BenchmarkSubscriber(b *testing.B) {
	pub, err := events.New(loopback)
	if err != nil {
		b.Fatal(err)
	}
	defer pub.Close()
	record := pub.Subscriber()
	hs := hashes(b, 2)
	ev := &kv.Event{Kind: kv.BlockStored, Hashes: hs[1:], Parent: hs[0], Tokens: seq(0, 16), BlockSize: 16}
	b.ReportAllocs()
	for b.Loop() {
		record(ev)
	}
	b.StopTimer()
	pub.Flush()
	st := pub.Snapshot()
	b.ReportMetric(float64(st.DroppedEvents)/float64(st.Events), "dropped/event")
}
