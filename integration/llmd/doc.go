// Package llmd proves that llm-d's own router code reads locus's KV events
// as it reads vLLM's: its tests feed a kv.Manager's event stream, over a
// real ZMQ socket, into llm-d-kv-cache's kvevents.Pool, in-memory index and
// longest-prefix scorer, and assert the scores a router would act on.
// locus's own fleet index and scorer get the same events in process, and
// must give llm-d's scores exactly.
//
// It is a module of its own so that users of locus never compile llm-d or
// its Kubernetes dependencies. Run its tests from this directory with
// go test ./...
package llmd
