package lint

import (
	"reflect"
	"testing"

	"golang.org/x/sys/cpu"

	"github.com/locus-go/locus/adapters"
	"github.com/locus-go/locus/classes"
	"github.com/locus-go/locus/internal/relay"
	"github.com/locus-go/locus/kv"
	"github.com/locus-go/locus/pool"
	"github.com/locus-go/locus/transport/mailbox"
)

// TestWorkerStatePadded keeps the per-worker endpoints that their worker
// writes on every call padded on both sides, so that two workers'
// endpoints never share a cache line (false sharing between workers that
// should not contend at all).
func TestWorkerStatePadded(t *testing.T) {
	pad := reflect.TypeFor[cpu.CacheLinePad]()
	relaySender := reflect.TypeFor[relay.Sender[pool.Handle]]()
	for _, typ := range []reflect.Type{
		reflect.TypeFor[pool.Sender](), reflect.TypeFor[classes.Sender](),
		reflect.TypeFor[mailbox.Producer](), relaySender,
	} {
		n := typ.NumField()
		if n < 2 || typ.Field(0).Type != pad || typ.Field(n-1).Type != pad {
			t.Errorf("%v is not padded with cpu.CacheLinePad on both sides", typ)
		}
	}
	// The releasers of kv and adapters are a relay.Sender and nothing else.
	for _, typ := range []reflect.Type{reflect.TypeFor[kv.Releaser](), reflect.TypeFor[adapters.Releaser]()} {
		if typ.NumField() != 1 || typ.Field(0).Type != relaySender {
			t.Errorf("%v is not a relay.Sender alone, whose padding keeps workers apart", typ)
		}
	}
}
