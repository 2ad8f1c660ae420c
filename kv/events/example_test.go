package events_test

import (
	"fmt"

	"github.com/locus-go/locus"
	"github.com/locus-go/locus/kv"
	"github.com/locus-go/locus/kv/events"
)

// A manager's cache events go out in vLLM's format, one batch per
// scheduling step, to the routers subscribed to the topic.
func Example() {
	pub, err := events.New("tcp://127.0.0.1:0", // vLLM's default is tcp://*:5557
		events.WithTopic(events.Topic("pod-0", "llama-3-8b")))
	if err != nil {
		fmt.Println(err)
		return
	}
	p, _ := locus.Default(locus.WithBlocks(64))
	defer p.Close()
	m, _ := kv.New(p, kv.WithSubscriber(pub.Subscriber()))

	id, _, _ := m.Admit(make([]uint32, 40), kv.Key{}) // stores two full blocks
	_ = m.Release(id)
	pub.Flush() // end of the step: its events are one batch
	_, _ = m.Reset()
	pub.Flush()

	_ = m.Close()
	if err := pub.Close(); err != nil { // flushes; reports what was dropped
		fmt.Println(err)
	}
	st := pub.Snapshot()
	fmt.Printf("%d events in %d batches, %d dropped\n", st.PublishedEvents, st.Published, st.DroppedEvents)
	// Output: 2 events in 2 batches, 0 dropped
}
