// Package events publishes the cache events of a kv.Manager in vLLM's KV
// event format, over a ZMQ PUB socket, so that KV-cache-aware routers (such
// as llm-d's KV-cache indexer) see a locus-based engine as they see a vLLM
// engine: they learn which blocks it caches and route requests with a
// shared prefix to it.
//
// Wire it in with kv.WithSubscriber:
//
//	pub, err := events.New("tcp://*:5557", events.WithTopic(events.Topic("pod-1", "llama-3-8b")))
//	m, err := kv.New(p, kv.WithSubscriber(pub.Subscriber()))
//	...
//	m.Close()
//	err = pub.Close() // flushes; reports batches it had to drop
//
// # The wire format
//
// Every message is a multipart ZMQ message of three frames, as vLLM's
// ZmqEventPublisher sends them:
//
//	[topic, sequence number, payload]
//
// The topic is WithTopic's (vLLM's default is empty; llm-d expects
// "kv@<pod>@<model>", see Topic). The sequence number is 8 bytes,
// big-endian. The payload is a MessagePack array, vLLM's EventBatch:
//
//	[ts, events, data_parallel_rank]
//
// ts is a float64 of seconds since the Unix epoch, taken when the batch is
// sealed; data_parallel_rank is WithDataParallelRank's (default 0, sent as
// vLLM's publisher sends it, always present). Each event comes from one
// kv.Event, field by field:
//
//	BlockStored       block_hashes      kv.Event.Hashes, in chain order
//	                  parent_block_hash kv.Event.Parent; nil when zero (the first block of a sequence)
//	                  token_ids         kv.Event.Tokens, BlockSize per hash, as unsigned integers
//	                  block_size        kv.Event.BlockSize
//	                  lora_id           nil (locus names adapters; it has no integer ids)
//	                  medium            kv.Event.Medium (a tier's, such as "CPU"), or when that
//	                                    is empty (the hot pool) WithMedium's (default "GPU");
//	                                    nil when both are empty
//	                  lora_name         kv.Event.Key.Adapter; nil when empty
//	                  extra_keys        one entry per block: nil, or the array of vLLM's extra
//	                                    hash keys of that block: the adapter name, then, in a
//	                                    sequence's first block, the cache salt (Key.Salt)
//	BlockRemoved      block_hashes      kv.Event.Hashes
//	                  medium            as above
//	AllBlocksCleared  (no fields)
//
// Two encodings of an event exist, and WithEncoding picks one:
//
//   - Positional (the default): an array whose first element is the tag,
//     ["BlockStored", block_hashes, parent_block_hash, token_ids,
//     block_size, lora_id, medium, lora_name, extra_keys], ["BlockRemoved",
//     block_hashes, medium], ["AllBlocksCleared"]: vLLM's encoding while its
//     events were msgspec Structs with array_like=True and tag=True. Every
//     version of llm-d's indexer decodes it.
//   - Named: a map with the tag under "type" and the fields under their
//     names, in the order above: vLLM's encoding since it dropped
//     array_like from its events (vllm-project/vllm#42892). llm-d's indexer
//     decodes it since it supports both (llm-d/llm-d-kv-cache#661); choose
//     it for routers that follow current vLLM only.
//
// Integers are encoded in their shortest unsigned form and strings as str,
// as msgspec encodes them, but for block hashes (block_hashes and
// parent_block_hash in the Uint64Hashes form): those are always the 8-byte
// uint 64 form (0xcf), whatever their value. A hash below 2^32 in its
// shortest form is rejected by llm-d's indexer, with its whole batch (vLLM
// has the same weakness); the 8-byte form is valid MessagePack for every
// decoder.
//
// # Block hashes
//
// vLLM sends a block hash either as the last 8 bytes of its digest read as a
// big-endian unsigned integer (its default, VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES=1)
// or as the digest's bytes (VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES=0).
// WithHashes selects the form: Uint64Hashes (the default, kv.Hash.Uint64, a
// msgpack unsigned integer) or ByteHashes (kv.Hash.AppendBytes, a msgpack
// bin). A manager configured with vLLM's hash algorithm and seed (see
// kv.WithHash) therefore sends the keys a vLLM engine would send for the
// same tokens, and a router computes the same keys from a prompt.
//
// # Never blocking the owner
//
// The subscriber runs on the manager's owner goroutine, inside the manager
// call that changed the cache. It copies the event into the current batch,
// one of a fixed set of batch buffers recycled between the owner and the
// publisher's goroutine, and hands a full batch (WithBatchSize events) to
// that goroutine through a bounded queue (WithBuffer batches) with a
// non-blocking send. It never waits and, once the buffers have grown to
// the batches' size, never allocates. The publisher's goroutine encodes
// batches and writes them to the socket; it also flushes a batch that has
// waited WithFlushInterval since its first event, and the owner can seal
// the current batch itself with Flush, once per step as vLLM does.
//
// When the queue is full (the publisher's goroutine is behind) the owner
// drops the batch it just sealed, whole, and counts it in Stats.Dropped and
// Stats.DroppedEvents; metrics.NewPublisher exports them. A dropped batch
// still consumes its sequence number, so sequence numbers are gap-free over
// the batches published as long as nothing is dropped, and a subscriber
// that finds a gap knows that the batches in it were lost: its view of the
// cache is incomplete from there on (vLLM's subscribers react to a gap the
// same way).
//
// # Subscribers: one queue each
//
// The socket gives every subscriber a queue of its own (WithHighWaterMark
// batches, ZMQ's per-subscriber SNDHWM) and a writer goroutine of its own,
// so a slow or stalled subscriber loses its own batches and nobody else's:
// a batch that finds a subscriber's queue full is dropped for that
// subscriber only, counted in its SubscriberStats.Dropped (Subscribers)
// and in Stats.Undelivered, and that subscriber sees the gap in the
// sequence numbers. A subscriber whose connection accepts nothing for
// WithWriteTimeout is disconnected (Stats.TimedOut); a ZMQ SUB socket
// reconnects by itself. Every copy of a published batch is either
// delivered (written to the subscriber's connection, Stats.Delivered) or
// counted undelivered: nothing is lost silently.
//
// Close seals and publishes what the owner holds, gives the subscribers'
// writers up to WithLinger to write their queues, then closes every
// connection and counts what was still queued as undelivered. It returns
// within the linger plus a quarter of a second, whatever the subscribers
// do, and its error (a *DroppedError) reports every loss.
//
// # Late subscribers and replay
//
// A subscriber receives the batches published after it has connected and
// sent its subscription; those published before are lost to it (ZMQ's
// "slow joiner"), and a batch no subscriber covered is counted in
// Stats.Unheard. An engine that must not lose its first batches waits for
// its routers with WaitSubscribers before its first step. A subscriber
// that joins late, restarts, or finds a gap catches up through the replay
// socket (WithReplay), vLLM's ROUTER protocol: it keeps the most recent
// WithReplayBuffer batches (default 10,000, vLLM's buffer_steps); a client
// (DEALER or REQ) sends [empty, start] with start the 8-byte big-endian
// sequence number it wants first, and receives [empty, seq, payload] for
// each kept batch from start on, then [empty, EndOfReplay, empty]. A
// router written for vLLM's replay socket uses it unchanged. Batches
// dropped before they were published (the owner's queue was full) are in
// no replay: the gap stays, as in vLLM.
//
// # Reading the stream: Decode and Subscribe
//
// Decode (and DecodeMessage, with the topic and sequence frames) turns a
// payload back into Event values, for both encodings and both hash forms,
// strictly: anything else fails with ErrMalformed, and hostile lengths
// cost no more memory than the payload's size. A hash comes back as a
// WireHash, not a kv.Hash: the integer form is only the digest's last 8
// bytes. Routers key blocks by its Uint64, as llm-d does.
//
// Subscribe is a router's end of the socket: a ZMQ SUB connection to a
// publisher (this package's or vLLM's) that decodes each batch and hands
// it on in sequence order. It fills a gap in the sequence numbers, and
// the first batches of a late join, from the replay socket
// (WithReplayFrom), counts what the replay could not give back
// (Batch.Missed), marks the first batch of a restarted publisher
// (Batch.Restarted), and connects again when the connection is lost.
// fleet.Follow applies a Subscription's batches to a fleet.Index.
//
// # Dependencies
//
// This package is where locus imports ZMQ (github.com/go-zeromq/zmq4, a
// pure-Go ZMTP implementation, the one llm-d's indexer subscribes with) and
// MessagePack (github.com/tinylib/msgp's runtime, whose append functions
// encode without reflection or allocation). Packages pool and kv import
// neither.
//
// zmq4's own PUB socket has one queue for all its subscribers and writes
// to them in turn, so one stalled subscriber stalls all of them (measured:
// the others froze for seconds, then all lost the same batches). This
// package therefore uses zmq4 for the ZMTP connection only (the greeting,
// the NULL handshake, the framing: zmq4.Open) and does the PUB socket's
// work itself: listening or dialing (WithDial; reconnecting when the
// connection is lost), subscriptions per connection, and a queue and a
// writer per subscriber. Endpoints are tcp:// and ipc://. Every goroutine
// it starts returns by Close.
package events
