package lint

import (
	"reflect"
	"testing"

	"golang.org/x/sys/cpu"

	"github.com/locus-go/locus/classes"
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
	for _, typ := range []reflect.Type{
		reflect.TypeFor[pool.Sender](), reflect.TypeFor[kv.Releaser](),
		reflect.TypeFor[classes.Sender](), reflect.TypeFor[mailbox.Producer](),
	} {
		n := typ.NumField()
		if n < 2 || typ.Field(0).Type != pad || typ.Field(n-1).Type != pad {
			t.Errorf("%v is not padded with cpu.CacheLinePad on both sides", typ)
		}
	}
}
