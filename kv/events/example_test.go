package events_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/go-zeromq/zmq4"

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

// A router that joined late, restarted, or found a gap in the sequence
// numbers asks the replay socket for the batches from the first one it
// missed, as it would ask vLLM's.
func Example_replay() {
	pub, err := events.New("tcp://127.0.0.1:0", events.WithReplay("tcp://127.0.0.1:0"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer pub.Close()
	record := pub.Subscriber()
	for range 3 { // three steps before any router listens: the slow joiner's loss
		record(&kv.Event{Kind: kv.AllBlocksCleared})
		pub.Flush()
	}
	for pub.Snapshot().Published < 3 {
		time.Sleep(time.Millisecond)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	replay := zmq4.NewDealer(ctx)
	defer replay.Close()
	if err := replay.Dial("tcp://" + pub.ReplayAddr().String()); err != nil {
		fmt.Println(err)
		return
	}
	start := binary.BigEndian.AppendUint64(nil, 1) // the first batch it wants
	_ = replay.Send(zmq4.NewMsgFrom([]byte{}, start))
	for {
		msg, err := replay.Recv() // [empty, seq, payload]
		if err != nil {
			fmt.Println(err)
			return
		}
		if [8]byte(msg.Frames[1]) == events.EndOfReplay {
			fmt.Println("end")
			break
		}
		fmt.Println("batch", binary.BigEndian.Uint64(msg.Frames[1]))
	}
	fmt.Println("unheard:", pub.Snapshot().Unheard)
	// Output:
	// batch 1
	// batch 2
	// end
	// unheard: 3
}

// An engine whose first batches matter waits for its routers first.
func ExamplePublisher_WaitSubscribers() {
	pub, err := events.New("tcp://127.0.0.1:0", events.WithTopic(events.Topic("pod-0", "llama-3-8b")))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer pub.Close()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	router := zmq4.NewSub(ctx)
	defer router.Close()
	_ = router.SetOption(zmq4.OptionSubscribe, "kv@")
	if err := router.Dial("tcp://" + pub.Addr().String()); err != nil {
		fmt.Println(err)
		return
	}

	wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
	defer wcancel()
	if err := pub.WaitSubscribers(wctx, 1); err != nil {
		fmt.Println(err)
		return
	}
	pub.Subscriber()(&kv.Event{Kind: kv.AllBlocksCleared})
	pub.Flush()
	msg, _ := router.Recv()
	fmt.Printf("%s batch %d\n", msg.Frames[0], binary.BigEndian.Uint64(msg.Frames[1]))
	// Output: kv@pod-0@llama-3-8b batch 0
}
