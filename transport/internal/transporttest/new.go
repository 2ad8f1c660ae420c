package transporttest

import (
	"errors"
	"fmt"
	"strings"

	"github.com/locus-go/locus/pool"
)

// CheckNew checks what a bounded transport's New returned. want is the
// configuration's bounds, zero if it is invalid. An invalid configuration
// must give a nil transport and an error wrapping pool.ErrInvalidConfig that
// reads "pool: invalid configuration: <pkg>: ..." and contains wantErr. A
// valid one must give the wanted bounds and a transport that carries a
// handle (tried only for capacities up to 4096, which allocate quickly).
func CheckNew[E any, T interface {
	*E
	pool.BoundedTransport
}](tr T, err error, pkg string, want pool.Bounds, wantErr string) error {
	if want == (pool.Bounds{}) {
		if tr != nil || !errors.Is(err, pool.ErrInvalidConfig) {
			return fmt.Errorf("the constructor returned %v, %v; want nil and an error wrapping pool.ErrInvalidConfig", tr, err)
		}
		prefix := "pool: invalid configuration: " + pkg + ": "
		if !strings.HasPrefix(err.Error(), prefix) || !strings.Contains(err.Error(), wantErr) {
			return fmt.Errorf("error %q does not read %q... with %q", err, prefix, wantErr)
		}
		return nil
	}
	if err != nil || tr == nil {
		return fmt.Errorf("the constructor returned %v, %v; want a transport", tr, err)
	}
	defer tr.Close()
	if got := tr.Bounds(); got != want {
		return fmt.Errorf("Bounds() = %+v, want %+v", got, want)
	}
	if want.Capacity > 1<<12 {
		return nil
	}
	prod, err := tr.NewProducer()
	if err != nil {
		return err
	}
	if err := prod.Send(Seq(0, 0, 1)); err != nil {
		return err
	}
	r := NewRecorder()
	r.Drain(tr)
	return r.Want(Seq(0, 0, 1))
}

// B is the part of *testing.B that DrainIdle uses.
type B interface {
	Loop() bool
	ReportAllocs()
	Fatal(args ...any)
}

// DrainIdle benchmarks an idle Drain of tr after 5000 producers were made,
// used once and dropped: closed if retired, else left open.
func DrainIdle(b B, tr pool.Transport, retired bool) {
	defer tr.Close()
	sink := pool.NewSink(func([]pool.Handle) {})
	chunk := Seq(0, 0, 4)
	for range 5000 {
		prod, err := tr.NewProducer()
		if err != nil {
			b.Fatal(err)
		}
		if err := prod.Send(chunk); err != nil {
			b.Fatal(err)
		}
		if retired {
			if err := prod.Close(); err != nil {
				b.Fatal(err)
			}
		}
	}
	tr.Drain(sink)
	b.ReportAllocs()
	for b.Loop() {
		tr.Drain(sink)
	}
}
