package classes_test

// The contract checks of a size-class allocator: the cases a conformance
// suite for size classes would hold. They take the allocator through the
// small blockAllocator interface, so that they run over classes.Pool (any
// components) and over the deliberately broken allocators of
// broken_test.go, which they must reject.

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"

	"github.com/locus-go/locus/pool"
)

// blockAllocator is the surface the checks exercise. H is its handle.
type blockAllocator[H comparable] interface {
	Alloc(n int) (H, error)
	Free(h H) error
	// Bytes returns a live block's memory: its class's block size.
	Bytes(h H) ([]byte, error)
	// Accounting returns one entry per class, smallest first.
	Accounting() []classAccounting
	// Reclass returns h with its class index replaced by k: a forged
	// handle, as a caller that mixed up classes would hold.
	Reclass(h H, k int) H
	NewSender() (blockSender[H], error)
	Drain() (int, error)
	Close() error
}

type blockSender[H comparable] interface {
	FreeChunk(chunk []H) error
	Close() error
}

type classAccounting struct {
	Size, Capacity, Live, Free int
	Allocs, Frees, Requested   uint64
	RemoteSubmitted            uint64
	RemoteDrained              uint64
}

type blockCase[H comparable] struct {
	name        string
	explanation string
	check       func(newA func() (blockAllocator[H], error)) error
}

type violation struct {
	name, explanation string
	err               error
}

func (v *violation) Error() string {
	return fmt.Sprintf("%s: %v\n\tcontract: %s", v.name, v.err, v.explanation)
}

func (v *violation) Unwrap() error { return v.err }

// checkClasses runs every case on fresh allocators (newA must return one of
// at least two classes, each of at least 8 blocks) and returns the
// violations joined.
func checkClasses[H comparable](newA func() (blockAllocator[H], error)) error {
	var errs []error
	for _, c := range blockCases[H]() {
		if err := c.check(newA); err != nil {
			errs = append(errs, &violation{c.name, c.explanation, err})
		}
	}
	return errors.Join(errs...)
}

func blockCases[H comparable]() []blockCase[H] {
	return []blockCase[H]{
		{"smallest-class", "an allocation of n bytes takes a block of the smallest class of at least n bytes, " +
			"counts n in that class's Requested, and sizes of 0, below 0 or above the largest class are refused " +
			"with pool.ErrInvalidArgument", checkSmallest[H]},
		{"churn", "under random allocations and frees of every size, live blocks never share memory, an " +
			"allocation fails only when its class has no free block, and every class's accounting is exact", checkChurn[H]},
		{"rejects", "a freed, double-freed, foreign, zero, re-classed or out-of-range handle is rejected with an " +
			"error matching pool.ErrInvalidHandle and changes nothing", checkRejects[H]},
		{"isolation", "an exhausted class refuses with pool.ErrExhausted while the other classes still " +
			"allocate, and no class lends its blocks to another", checkIsolation[H]},
		{"remote", "blocks of every class freed by concurrent senders in mixed chunks come back exactly once " +
			"when the owner drains", checkRemote[H]},
		{"closed", "after Close every call fails with pool.ErrClosed", checkClosed[H]},
	}
}

type liveBlock struct {
	class int
	tag   byte
	n     int
}

// book is the checks' record of an allocator's live blocks.
type book[H comparable] struct {
	a     blockAllocator[H]
	sizes []int
	live  map[H]liveBlock
	want  []classAccounting
	tag   byte
}

func newBook[H comparable](a blockAllocator[H]) *book[H] {
	b := &book[H]{a: a, live: map[H]liveBlock{}, want: a.Accounting()}
	for _, c := range b.want {
		b.sizes = append(b.sizes, c.Size)
	}
	return b
}

func (b *book[H]) classFor(n int) int {
	for k, s := range b.sizes {
		if n <= s {
			return k
		}
	}
	return -1
}

// alloc allocates n bytes and checks the block: the right class, memory no
// live block has.
func (b *book[H]) alloc(n int) (H, error) {
	k := b.classFor(n)
	h, err := b.a.Alloc(n)
	if err != nil {
		return h, err
	}
	if _, dup := b.live[h]; dup {
		return h, fmt.Errorf("Alloc(%d) returned live handle %v again", n, h)
	}
	buf, err := b.a.Bytes(h)
	if err != nil || len(buf) != b.sizes[k] {
		return h, fmt.Errorf("Alloc(%d) gave a block of %d bytes (%v); the smallest class that holds it has %d", n, len(buf), err, b.sizes[k])
	}
	b.tag++
	for i := range buf {
		buf[i] = b.tag
	}
	b.live[h] = liveBlock{k, b.tag, n}
	b.want[k].Live++
	b.want[k].Free--
	b.want[k].Allocs++
	b.want[k].Requested += uint64(n)
	return h, nil
}

func (b *book[H]) checkBlock(h H) error {
	lb := b.live[h]
	buf, err := b.a.Bytes(h)
	if err != nil {
		return fmt.Errorf("Bytes of a live block: %v", err)
	}
	for i, x := range buf {
		if x != lb.tag {
			return fmt.Errorf("byte %d of a live block is %#x, want its tag %#x: another block shares its memory", i, x, lb.tag)
		}
	}
	return nil
}

func (b *book[H]) free(h H) error {
	if err := b.checkBlock(h); err != nil {
		return err
	}
	if err := b.a.Free(h); err != nil {
		return fmt.Errorf("Free of a live block: %v", err)
	}
	b.forget(h)
	return nil
}

// forget records that h was freed (locally, or remotely and drained).
func (b *book[H]) forget(h H) {
	k := b.live[h].class
	delete(b.live, h)
	b.want[k].Live--
	b.want[k].Free++
	b.want[k].Frees++
}

func (b *book[H]) checkAccounting() error {
	got := b.a.Accounting()
	for k := range got {
		got[k].RemoteSubmitted, got[k].RemoteDrained = b.want[k].RemoteSubmitted, b.want[k].RemoteDrained
	}
	if !slices.Equal(got, b.want) {
		return fmt.Errorf("accounting\n got %+v\nwant %+v", got, b.want)
	}
	return nil
}

func use[H comparable](newA func() (blockAllocator[H], error), f func(*book[H]) error) error {
	a, err := newA()
	if err != nil {
		return err
	}
	defer a.Close()
	return f(newBook(a))
}

func checkSmallest[H comparable](newA func() (blockAllocator[H], error)) error {
	return use(newA, func(b *book[H]) error {
		var sizes []int
		for _, s := range b.sizes {
			sizes = append(sizes, 1, s-1, s, s+1)
		}
		for _, n := range sizes {
			if n <= 0 || n > b.sizes[len(b.sizes)-1] {
				continue
			}
			h, err := b.alloc(n)
			if err != nil {
				return err
			}
			if err := b.checkAccounting(); err != nil {
				return fmt.Errorf("after Alloc(%d): %v", n, err)
			}
			if err := b.free(h); err != nil {
				return err
			}
		}
		before := b.a.Accounting()
		for _, n := range []int{0, -1, b.sizes[len(b.sizes)-1] + 1, int(^uint(0) >> 1)} {
			if _, err := b.a.Alloc(n); !errors.Is(err, pool.ErrInvalidArgument) {
				return fmt.Errorf("Alloc(%d) = %v, want pool.ErrInvalidArgument", n, err)
			}
		}
		if after := b.a.Accounting(); !slices.Equal(after, before) {
			return fmt.Errorf("refused sizes changed the accounting from %+v to %+v", before, after)
		}
		return b.checkAccounting()
	})
}

func checkChurn[H comparable](newA func() (blockAllocator[H], error)) error {
	return use(newA, func(b *book[H]) error {
		rng := rand.New(rand.NewPCG(3, 4))
		var hs []H
		largest := b.sizes[len(b.sizes)-1]
		for op := range 3000 {
			if len(hs) > 0 && rng.IntN(5) < 2 {
				i := rng.IntN(len(hs))
				if err := b.free(hs[i]); err != nil {
					return fmt.Errorf("op %d: %v", op, err)
				}
				hs[i] = hs[len(hs)-1]
				hs = hs[:len(hs)-1]
			} else {
				n := 1 + rng.IntN(largest)
				k := b.classFor(n)
				h, err := b.alloc(n)
				switch {
				case err == nil:
					hs = append(hs, h)
				case errors.Is(err, pool.ErrExhausted) && b.want[k].Free == 0:
				default:
					return fmt.Errorf("op %d: Alloc(%d) with %d free blocks in its class: %v", op, n, b.want[k].Free, err)
				}
			}
			if err := b.checkAccounting(); err != nil {
				return fmt.Errorf("op %d: %v", op, err)
			}
		}
		for _, h := range hs {
			if err := b.free(h); err != nil {
				return err
			}
		}
		return b.checkAccounting()
	})
}

func rejected(what string, err error) error {
	if !errors.Is(err, pool.ErrInvalidHandle) {
		return fmt.Errorf("%s = %v, want an error matching pool.ErrInvalidHandle", what, err)
	}
	return nil
}

func checkRejects[H comparable](newA func() (blockAllocator[H], error)) error {
	f, err := newA()
	if err != nil {
		return err
	}
	defer f.Close()
	return use(newA, func(b *book[H]) error {
		small, big := b.sizes[0], b.sizes[len(b.sizes)-1]
		keepSmall, err := b.alloc(small)
		if err != nil {
			return err
		}
		keepBig, err := b.alloc(big)
		if err != nil {
			return err
		}
		old, err := b.alloc(small)
		if err != nil {
			return err
		}
		if err := b.free(old); err != nil {
			return err
		}
		reused, err := b.alloc(small)
		if err != nil {
			return err
		}
		foreign, err := f.Alloc(small)
		if err != nil {
			return err
		}
		var zero H
		bad := []struct {
			what string
			h    H
		}{
			{"a freed handle", old},
			{"a handle of another allocator", foreign},
			{"the zero handle", zero},
			{"a live small block re-classed as big", b.a.Reclass(keepSmall, len(b.sizes)-1)},
			{"a live big block re-classed as small", b.a.Reclass(keepBig, 0)},
			{"a handle naming a class that does not exist", b.a.Reclass(keepSmall, len(b.sizes))},
		}
		before := b.a.Accounting()
		for _, x := range bad {
			if err := rejected("Free of "+x.what, b.a.Free(x.h)); err != nil {
				return err
			}
			if _, err := b.a.Bytes(x.h); rejected("Bytes of "+x.what, err) != nil {
				return rejected("Bytes of "+x.what, err)
			}
		}
		if after := b.a.Accounting(); !slices.Equal(after, before) {
			return fmt.Errorf("rejected calls changed the accounting from %+v to %+v", before, after)
		}
		for _, h := range []H{keepSmall, keepBig, reused} {
			if err := b.free(h); err != nil {
				return fmt.Errorf("after the rejected calls: %v", err)
			}
		}
		if err := rejected("a double Free", b.a.Free(reused)); err != nil {
			return err
		}
		return b.checkAccounting()
	})
}

func checkIsolation[H comparable](newA func() (blockAllocator[H], error)) error {
	return use(newA, func(b *book[H]) error {
		var hs []H
		for b.want[0].Free > 0 {
			h, err := b.alloc(1)
			if err != nil {
				return fmt.Errorf("filling the smallest class with %d blocks free: %v", b.want[0].Free, err)
			}
			hs = append(hs, h)
		}
		before := b.a.Accounting()
		if _, err := b.a.Alloc(1); !errors.Is(err, pool.ErrExhausted) {
			return fmt.Errorf("Alloc(1) with the smallest class full = %v, want pool.ErrExhausted", err)
		}
		if after := b.a.Accounting(); !slices.Equal(after, before) {
			return fmt.Errorf("a refused allocation changed the accounting from %+v to %+v", before, after)
		}
		h, err := b.alloc(b.sizes[1])
		if err != nil {
			return fmt.Errorf("the next class refused while the smallest was full: %v", err)
		}
		for _, h := range append(hs, h) {
			if err := b.free(h); err != nil {
				return err
			}
		}
		return b.checkAccounting()
	})
}

func checkRemote[H comparable](newA func() (blockAllocator[H], error)) error {
	return use(newA, func(b *book[H]) error {
		const workers = 4
		var hs []H
		for k, c := range b.want {
			for range c.Capacity / 2 {
				h, err := b.alloc(b.sizes[k])
				if err != nil {
					return err
				}
				hs = append(hs, h)
			}
		}
		rand.New(rand.NewPCG(5, 6)).Shuffle(len(hs), func(i, j int) { hs[i], hs[j] = hs[j], hs[i] })
		var wg sync.WaitGroup
		errs := make([]error, workers)
		for w := range workers {
			s, err := b.a.NewSender()
			if err != nil {
				return err
			}
			mine := hs[w*len(hs)/workers : (w+1)*len(hs)/workers]
			wg.Go(func() {
				defer s.Close()
				for len(mine) > 0 {
					n := min(3, len(mine))
					if err := s.FreeChunk(mine[:n]); err != nil {
						errs[w] = err
						return
					}
					mine = mine[n:]
				}
			})
		}
		got := 0
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		for finished := false; !finished; {
			select {
			case <-done:
				finished = true
			default:
			}
			n, err := b.a.Drain()
			if err != nil {
				return fmt.Errorf("Drain: %v", err)
			}
			got += n
		}
		if err := errors.Join(errs...); err != nil {
			return err
		}
		for range 16 { // a bounded transport may take several drains
			n, err := b.a.Drain()
			if err != nil {
				return err
			}
			got += n
		}
		if got != len(hs) {
			return fmt.Errorf("drains returned %d blocks, the senders freed %d", got, len(hs))
		}
		for _, h := range hs {
			b.forget(h)
		}
		for k := range b.want {
			b.want[k].RemoteSubmitted += uint64(b.want[k].Capacity / 2)
			b.want[k].RemoteDrained += uint64(b.want[k].Capacity / 2)
		}
		got2 := b.a.Accounting()
		for k := range got2 {
			if got2[k].RemoteSubmitted != b.want[k].RemoteSubmitted || got2[k].RemoteDrained != b.want[k].RemoteDrained {
				return fmt.Errorf("class %d: %d submitted, %d drained; want %d of each", k, got2[k].RemoteSubmitted, got2[k].RemoteDrained, b.want[k].RemoteDrained)
			}
		}
		return b.checkAccounting()
	})
}

func checkClosed[H comparable](newA func() (blockAllocator[H], error)) error {
	a, err := newA()
	if err != nil {
		return err
	}
	h, err := a.Alloc(1)
	if err != nil {
		return err
	}
	s, err := a.NewSender()
	if err != nil {
		return err
	}
	if err := a.Close(); err != nil {
		return fmt.Errorf("Close: %v", err)
	}
	for what, err := range map[string]error{
		"Alloc":            func() error { _, err := a.Alloc(1); return err }(),
		"Free":             a.Free(h),
		"Bytes":            func() error { _, err := a.Bytes(h); return err }(),
		"Drain":            func() error { _, err := a.Drain(); return err }(),
		"Sender.FreeChunk": s.FreeChunk([]H{h}),
		"Close":            a.Close(),
	} {
		if !errors.Is(err, pool.ErrClosed) {
			return fmt.Errorf("%s after Close = %v, want pool.ErrClosed", what, err)
		}
	}
	return nil
}
