// Package fleet is what a KV-aware router needs in front of several
// engines (pods) that each run a kv.Manager: an Index of which pod holds
// which block on which medium, fed with the pods' kv.Event values; a Scorer
// that scores a request's block hashes per pod as llm-d's longest-prefix
// scorer does; and a Router that sends a request to the pod with the best
// score, or round-robin for comparison.
//
// # Semantics: llm-d's, exactly
//
// Index and Scorer reproduce llm-d-kv-cache v0.9.0's in-memory index, the
// way its event pool applies events, and its longest-prefix scorer, so
// that a router built on this package and llm-d's own indexer fed the same
// event stream give the same scores (the integration/llmd module of this
// repository runs both on one stream and compares):
//
//   - An entry is a (pod, medium) pair on a block. The medium is the
//     event's Medium lowercased; an empty Medium (kv's hot pool) is the
//     hot medium, "gpu" by default (WithHotMedium), as llm-d defaults an
//     event without a medium to "gpu" and kv/events publishes the hot
//     pool as "GPU".
//   - BlockStored with tokens adds the entry to every hash and makes the
//     hashes known (llm-d's engine-key → request-key mapping). If its
//     Parent is non-zero and not known, the whole event is dropped
//     (counted in IndexStats.Orphans), as llm-d drops it.
//   - BlockStored without tokens is an offload placeholder (llm-d's
//     device-tier update): the entry is added to every hash that is known;
//     unknown hashes are skipped (IndexStats.Unresolved). The parent check
//     above applies to it too.
//   - BlockRemoved removes only that (pod, medium) entry of each known
//     hash; the block stays indexed on the pod's other media and on other
//     pods. A hash stops being known when no entry of any pod remains on
//     it at a BlockRemoved. A BlockRemoved of an unknown hash does nothing.
//   - AllBlocksCleared removes every entry of the pod, on every medium,
//     whatever the event's Medium; it leaves the known hashes as they are
//     (llm-d keeps its engine-key mapping on Clear).
//   - A block holds at most PodsPerKey entries (default 10, llm-d's
//     podCacheSize), in least-recently-added order: adding an entry that is
//     present refreshes it, adding one to a full block drops the oldest.
//   - Score walks the request's hashes from the first. A pod's score is
//     the sum, over the longest run of consecutive hashes from the first
//     that the pod holds on any medium, of the highest weight among the
//     media it holds that hash on. Pods that do not hold the first hash
//     get no score (they are absent from Score's map, as from llm-d's).
//     The sum is accumulated in the same order as llm-d's, so the scores
//     are equal as float64 values, not only close.
//   - Weights are llm-d's backendConfigs: DefaultWeights is gpu 1.0 and
//     cpu 0.8; a medium without a weight scores 1.0 (so configure every
//     medium a tier emits, e.g. "disk" or "shared_storage").
//
// Hashes are keyed by their 64-bit form, kv.Hash.Uint64, which is what
// kv/events puts on the wire and what llm-d indexes. The Index keys blocks
// by the engine's hashes, while llm-d re-hashes the events' tokens into
// its own request keys: the two agree when llm-d's block size equals the
// engines' and requests carry no cache salt (kv hashes the salt into the
// first block; llm-d's request keys ignore it), which is the setting the
// Scorer is meant for. llm-d's bound on the total number of keys (an LRU of
// 10^8) and its speculative entries are not modelled.
//
// # Concurrency
//
// Index, Scorer and Router are safe for concurrent use: events arrive on
// one goroutine per engine (Apply, or the function Subscriber returns) while
// request goroutines score and pick. The Index is one map behind a
// sync.RWMutex: scoring takes the read lock, events the write lock.
//
// # When to use it, when not
//
// Use it for a router in Go in front of locus engines in one process or
// fed from their event streams, and to measure KV-aware routing
// (locus-eval fleet). Do not use it as a replacement for llm-d's indexer in
// a Kubernetes deployment: it has no pod discovery and no index backends
// besides memory.
//
// # Events over the wire
//
// In a router process, Follow subscribes to an engine's kv/events
// publisher over ZMQ (events.Subscribe: gaps filled from the replay
// socket, restarts detected) and applies its batches to the Index as the
// pod its topic names ("kv@<pod>@<model>", PodOf); a restarted engine's
// pod is cleared first. ApplyDecoded and ApplyBatch apply decoded events
// (events.Event) with Apply's semantics, for a router that reads the
// sockets itself. In the engines' own process, Index.Subscriber needs no
// socket.
package fleet
