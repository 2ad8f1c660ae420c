package main

import (
	"context"
	"encoding/binary"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"
	"github.com/stretchr/testify/require"
)

// With -subscribers, serving waits for its event subscriber before the
// first step, so the subscriber gets every batch from sequence number 0:
// none is lost to ZMQ's slow joiner.
func TestServeWaitsForSubscribers(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	endpoint := "tcp://" + l.Addr().String()
	require.NoError(t, l.Close())

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	sub := zmq4.NewSub(ctx, zmq4.WithAutomaticReconnect(true))
	defer sub.Close()
	require.NoError(t, sub.SetOption(zmq4.OptionSubscribe, ""))
	var seqs []uint64
	var wg sync.WaitGroup
	done := make(chan struct{})
	wg.Go(func() {
		for sub.Dial(endpoint) != nil { // the publisher is not listening yet
			select {
			case <-done:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
		for {
			msg, err := sub.Recv()
			if err != nil {
				return
			}
			if len(msg.Frames) == 3 && len(msg.Frames[1]) == 8 {
				seqs = append(seqs, binary.BigEndian.Uint64(msg.Frames[1]))
			}
		}
	})

	c := config{requests: 16, workers: 2, arrivals: 4, blocks: 256, tokensPerBlock: 16, prompt: 32, decode: 8, system: 64, prompts: 1}
	o := &observer{events: endpoint, topic: "kv@test@toy", subscribers: 1, wait: 10 * time.Second}
	var out strings.Builder
	require.NoError(t, serveShared(&out, c, o))
	require.NoError(t, o.close(&out))
	require.Contains(t, out.String(), "0 before any subscriber")
	time.Sleep(100 * time.Millisecond) // the last batches in flight
	close(done)
	cancel()
	wg.Wait()
	require.NotEmpty(t, seqs)
	require.Equal(t, uint64(0), seqs[0], "the subscriber missed the first batches")
}
