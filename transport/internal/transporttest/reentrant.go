package transporttest

import (
	"fmt"

	"github.com/locus-go/locus/pool"
)

// ReentrantDrain sends two handles, then drains with a sink that calls the
// transport's Drain again from inside Put. The nested Drain must do nothing:
// each handle is delivered once, and a later send is delivered whole.
func ReentrantDrain(s Subject) error {
	return s.withProducer(func(tr pool.Transport, prod pool.Producer) error {
		var got []pool.Handle
		var sink *pool.Sink
		depth := 0
		sink = pool.NewSink(func(c []pool.Handle) {
			got = append(got, c...)
			if depth == 0 {
				depth++
				tr.Drain(sink)
				depth--
			}
		})
		if err := prod.Send(Seq(0, 0, 2)); err != nil {
			return err
		}
		for range 4 { // a bounded transport may need several drains
			tr.Drain(sink)
		}
		if err := prod.Send(Seq(0, 2, 4)); err != nil {
			return err
		}
		for range 4 {
			tr.Drain(sink)
		}
		want := Seq(0, 0, 4)
		if len(got) != len(want) {
			return fmt.Errorf("delivered %v, want %v: a nested Drain delivered again or lost handles", got, want)
		}
		for i := range got {
			if got[i] != want[i] {
				return fmt.Errorf("delivered %v, want %v", got, want)
			}
		}
		return nil
	})
}
