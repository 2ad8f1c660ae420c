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
//	                  medium            WithMedium's (default "GPU"); nil when empty
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
// as msgspec encodes them.
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
// same way). The socket has a high-water mark of its own (WithHighWaterMark):
// past it, it discards messages for a subscriber that reads too slowly,
// which that subscriber also sees as a gap, and which the publisher cannot
// count.
//
// # Dependencies
//
// This package is where locus imports ZMQ (github.com/go-zeromq/zmq4, a
// pure-Go ZMTP implementation, the one llm-d's indexer subscribes with) and
// MessagePack (github.com/tinylib/msgp's runtime, whose append functions
// encode without reflection or allocation). Packages pool and kv import
// neither.
//
// zmq4's PUB socket queues a message and writes it to each subscriber in
// turn from a goroutine of its own: a subscriber that stops reading holds
// up the others until the high-water mark discards messages. Its release
// in use (v0.17.0) also leaves that goroutine parked after Close; make one
// publisher per process, not one per request.
package events
