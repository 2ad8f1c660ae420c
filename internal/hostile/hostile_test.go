// Package hostile calls every exported method of the library's types with
// nil, zero and closed receivers and zero arguments, by reflection, so that
// a method added later is covered without anyone listing it: none may
// panic or hang.
package hostile

import (
	"context"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/locus-go/locus"
	"github.com/locus-go/locus/adapters"
	"github.com/locus-go/locus/backing/cuda"
	"github.com/locus-go/locus/backing/heap"
	"github.com/locus-go/locus/backing/mmap"
	"github.com/locus-go/locus/classes"
	"github.com/locus-go/locus/fleet"
	"github.com/locus-go/locus/kv"
	"github.com/locus-go/locus/kv/events"
	"github.com/locus-go/locus/pages"
	"github.com/locus-go/locus/pool"
	"github.com/locus-go/locus/tier"
	"github.com/locus-go/locus/tier/disk"
	"github.com/locus-go/locus/tier/host"
	"github.com/locus-go/locus/tier/redis"
	"github.com/locus-go/locus/transport/mailbox"
	"github.com/locus-go/locus/transport/sharded"
	"github.com/locus-go/locus/transport/shared"
)

// subject is one receiver to call every method of.
type subject struct {
	name string
	v    any
}

// nilAndZero returns a nil and a zero receiver of *T.
func nilAndZero[T any]() []subject {
	var zero T
	name := fmt.Sprintf("%T", zero)
	return []subject{{"nil *" + name, (*T)(nil)}, {"zero " + name, new(T)}}
}

// closed returns what open made, after closing it (Close's error ignored).
func closed[T interface{ Close() error }](t *testing.T, name string, open func() (T, error)) subject {
	t.Helper()
	v, err := open()
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	_ = v.Close()
	return subject{"closed " + name, v}
}

func subjects(t *testing.T) []subject {
	var ss []subject
	ss = append(ss, nilAndZero[locus.DefaultPool]()...)
	ss = append(ss, nilAndZero[pool.Sender]()...)
	ss = append(ss, nilAndZero[heap.Backing]()...)
	ss = append(ss, nilAndZero[mmap.Backing]()...)
	ss = append(ss, nilAndZero[mailbox.Transport]()...)
	ss = append(ss, nilAndZero[shared.Transport]()...)
	ss = append(ss, nilAndZero[sharded.Transport]()...)
	ss = append(ss, nilAndZero[classes.DefaultPool]()...)
	ss = append(ss, nilAndZero[classes.Sender]()...)
	ss = append(ss, nilAndZero[pages.Pool]()...)
	ss = append(ss, nilAndZero[kv.Manager]()...)
	ss = append(ss, nilAndZero[kv.Releaser]()...)
	ss = append(ss, nilAndZero[kv.Table]()...)
	ss = append(ss, nilAndZero[events.Publisher]()...)
	ss = append(ss, nilAndZero[tier.Manager]()...)
	ss = append(ss, nilAndZero[host.Tier]()...)
	ss = append(ss, nilAndZero[host.Peer]()...)
	ss = append(ss, nilAndZero[mmap.View]()...)
	ss = append(ss, nilAndZero[disk.Tier]()...)
	ss = append(ss, nilAndZero[adapters.Manager]()...)
	ss = append(ss, nilAndZero[adapters.Releaser]()...)
	ss = append(ss, nilAndZero[adapters.Batcher]()...)
	ss = append(ss, nilAndZero[cuda.Device]()...)
	ss = append(ss, nilAndZero[cuda.Region]()...)
	ss = append(ss, nilAndZero[cuda.Backing]()...)
	ss = append(ss, nilAndZero[cuda.Copier]()...)
	ss = append(ss, nilAndZero[cuda.Registration]()...)
	ss = append(ss, nilAndZero[redis.Tier]()...)
	ss = append(ss, nilAndZero[events.Subscription]()...)
	ss = append(ss, nilAndZero[fleet.Index]()...)
	ss = append(ss, nilAndZero[fleet.Scorer]()...)
	ss = append(ss, nilAndZero[fleet.Router]()...)
	ss = append(ss, nilAndZero[fleet.Hasher]()...)
	ss = append(ss, nilAndZero[fleet.Follower]()...)
	ss = append(ss, nilAndZero[kv.Groups]()...)

	ss = append(ss,
		closed(t, "locus.DefaultPool", func() (*locus.DefaultPool, error) { return locus.Default(locus.WithBlocks(16)) }),
		closed(t, "classes.DefaultPool", func() (*classes.DefaultPool, error) {
			return classes.Default([]classes.Class{{Size: 64, Blocks: 8}})
		}),
		closed(t, "pages.Pool", func() (*pages.Pool, error) {
			b, err := heap.New(64*16, 1)
			if err != nil {
				return nil, err
			}
			return pages.New(b, 64)
		}),
		closed(t, "kv.Manager", func() (*kv.Manager, error) {
			p, err := locus.Default(locus.WithBlocks(16))
			if err != nil {
				return nil, err
			}
			return kv.New(p)
		}),
		closed(t, "events.Publisher", func() (*events.Publisher, error) { return events.New("tcp://127.0.0.1:0") }),
		closed(t, "tier.Manager", func() (*tier.Manager, error) {
			st, err := host.New(256, 4)
			if err != nil {
				return nil, err
			}
			return tier.New(st)
		}),
		closed(t, "disk.Tier", func() (*disk.Tier, error) {
			return disk.Open(filepath.Join(t.TempDir(), "tier"), 256, 4)
		}),
	)
	return ss
}

// args are zero values of a method's parameters, but a cancelled context
// (a nil context is a programming error the standard library panics on
// too) and, for a variadic method, no variadic arguments.
func args(m reflect.Method) []reflect.Value {
	typ := m.Type
	n := typ.NumIn() - 1 // less the receiver
	if typ.IsVariadic() {
		n--
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	ctxType := reflect.TypeFor[context.Context]()
	out := make([]reflect.Value, n)
	for i := range n {
		in := typ.In(i + 1)
		if in == ctxType {
			out[i] = reflect.ValueOf(ctx)
			continue
		}
		out[i] = reflect.Zero(in)
	}
	return out
}

func TestNoPanicOnHostileReceivers(t *testing.T) {
	calls := 0
	for _, s := range subjects(t) {
		v := reflect.ValueOf(s.v)
		for i := range v.NumMethod() {
			m := v.Type().Method(i)
			name := s.name + "." + m.Name
			done := make(chan any, 1)
			go func() {
				defer func() { done <- recover() }()
				v.Method(i).Call(args(m))
			}()
			select {
			case p := <-done:
				if p != nil {
					t.Errorf("%s panicked: %v", name, firstLine(fmt.Sprint(p)))
				}
			case <-time.After(5 * time.Second):
				t.Errorf("%s did not return within 5 s", name)
			}
			calls++
		}
	}
	if calls < 300 {
		t.Fatalf("only %d methods called: the subjects lost their methods?", calls)
	}
	t.Logf("%d methods called", calls)
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}
