package cuda_test

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/locus-go/locus/backing/cuda"
	"github.com/locus-go/locus/backing/mmap"
	"github.com/locus-go/locus/conformance"
	"github.com/locus-go/locus/pages"
	"github.com/locus-go/locus/policy/lifo"
	"github.com/locus-go/locus/pool"
	"github.com/locus-go/locus/transport/mailbox"
)

var gpu struct {
	once sync.Once
	d    *cuda.Device
	err  error
}

// device returns GPU 0, shared by the tests (retaining and releasing the
// primary context per test would rebuild it each time), or skips the test
// with the reason where there is none.
func device(t testing.TB) *cuda.Device {
	t.Helper()
	gpu.once.Do(func() { gpu.d, gpu.err = cuda.Open(0) })
	switch {
	case errors.Is(gpu.err, cuda.ErrNoDriver), errors.Is(gpu.err, cuda.ErrNoDevice):
		t.Skipf("no GPU: %v", gpu.err)
	case gpu.err != nil:
		t.Fatalf("Open(0): %v", gpu.err)
	}
	return gpu.d
}

func copier(t testing.TB, d *cuda.Device) *cuda.Copier {
	t.Helper()
	c, err := d.NewCopier()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Error(err)
		}
	})
	return c
}

// xfer copies one batch and waits for it.
func xfer(t testing.TB, c *cuda.Copier, dir cuda.Direction, copies []cuda.Copy) {
	t.Helper()
	j, err := c.Submit(dir, copies)
	if err != nil {
		t.Fatalf("Submit(%v, %d copies): %v", dir, len(copies), err)
	}
	if err := c.Wait(j); err != nil {
		t.Fatalf("Wait(%v): %v", j, err)
	}
}

func random(n int, seed uint64) []byte {
	b := make([]byte, n)
	r := rand.NewChaCha8([32]byte{byte(seed), byte(seed >> 8)})
	_, _ = r.Read(b)
	return b
}

func TestGPUDevice(t *testing.T) {
	d := device(t)
	t.Logf("%s: driver %d, %d MiB, granularity %d KiB, batch copy %v",
		d.Name(), d.DriverVersion(), d.Memory()>>20, d.Granularity()>>10, d.HasBatchCopy())
	if d.Name() == "" || d.Memory() <= 0 || d.Granularity() <= 0 {
		t.Errorf("device facts: %q %d %d", d.Name(), d.Memory(), d.Granularity())
	}
	if _, err := cuda.Open(1 << 20); !errors.Is(err, cuda.ErrNoDevice) {
		t.Errorf("Open(1<<20) = %v, want ErrNoDevice", err)
	}
}

func TestGPURegionSleepWake(t *testing.T) {
	d := device(t)
	c := copier(t, d)
	r, err := d.NewRegion(3 << 20)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if g := d.Granularity(); r.Size()%g != 0 || r.Size() < 3<<20 {
		t.Fatalf("Size() = %d, granularity %d", r.Size(), g)
	}
	n := int(r.Size())
	got := make([]byte, n)
	xfer(t, c, cuda.ToHost, []cuda.Copy{{Dev: r.Ptr(), Host: got}})
	if !bytes.Equal(got, make([]byte, n)) {
		t.Fatal("a new region is not zeroed")
	}
	want := random(n, 1)
	xfer(t, c, cuda.ToDevice, []cuda.Copy{{Dev: r.Ptr(), Host: want}})
	xfer(t, c, cuda.ToHost, []cuda.Copy{{Dev: r.Ptr(), Host: got}})
	if !bytes.Equal(got, want) {
		t.Fatal("round trip through the region changed the bytes")
	}
	ptr := r.Ptr()
	if err := r.Sleep(); err != nil || !r.Asleep() {
		t.Fatalf("Sleep: %v, asleep %v", err, r.Asleep())
	}
	if err := r.Sleep(); err != nil {
		t.Fatalf("second Sleep: %v", err)
	}
	if err := r.Wake(); err != nil || r.Asleep() || r.Ptr() != ptr {
		t.Fatalf("Wake: %v, asleep %v, ptr %#x was %#x", err, r.Asleep(), r.Ptr(), ptr)
	}
	xfer(t, c, cuda.ToHost, []cuda.Copy{{Dev: r.Ptr(), Host: got}})
	if !bytes.Equal(got, make([]byte, n)) {
		t.Fatal("a woken region is not zeroed")
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

// TestGPUBackingContract checks conformance.TestBacking's contract on the
// device side (the suite itself reads the blocks from the host, which a
// device backing forbids): geometry, zeroed, disjoint, stable, close twice.
func TestGPUBackingContract(t *testing.T) {
	d := device(t)
	c := copier(t, d)
	const size, n = 64 << 10, 40
	for round := range 2 {
		b, err := d.NewBacking(size, n)
		if err != nil {
			t.Fatal(err)
		}
		if b.Len() != n {
			t.Fatalf("Len() = %d", b.Len())
		}
		host := make([]byte, size*n)
		copies := make([]cuda.Copy, n)
		for i := range n {
			blk := b.Block(i)
			if len(blk) != size || cap(blk) != size {
				t.Fatalf("Block(%d): len %d cap %d", i, len(blk), cap(blk))
			}
			if b.Ptr(i) != b.Ptr(0).Add(i*size) {
				t.Fatalf("Ptr(%d) = %#x, not contiguous", i, b.Ptr(i))
			}
			copies[i] = cuda.Copy{Dev: b.Ptr(i), Host: host[i*size : (i+1)*size]}
		}
		xfer(t, c, cuda.ToHost, copies)
		if !bytes.Equal(host, make([]byte, len(host))) {
			t.Fatalf("round %d: fresh blocks are not zero", round)
		}
		for i := range n { // block i holds byte i+1 everywhere
			for k := range size {
				host[i*size+k] = byte(i + 1)
			}
		}
		xfer(t, c, cuda.ToDevice, copies)
		clear(host)
		xfer(t, c, cuda.ToHost, copies)
		for i := range n {
			if blk := host[i*size : (i+1)*size]; !bytes.Equal(blk, bytes.Repeat([]byte{byte(i + 1)}, size)) {
				t.Fatalf("block %d does not hold what was written to it alone", i)
			}
		}
		if c.Path() == cuda.Coalesced && c.Calls() != 1 {
			t.Errorf("%d adjacent blocks took %d calls, want 1", n, c.Calls())
		}
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
		if err := b.Close(); err != nil || b.Len() != 0 || b.Block(0) != nil {
			t.Fatalf("second Close: %v, Len %d", err, b.Len())
		}
	}
}

// mirrored is a device backing whose Block returns host memory, so that the
// conformance suites, which write the blocks from the host, can check the
// pool's and pages' bookkeeping over a device backing (its geometry, its
// Close on every instance) and DeviceAddr over real device addresses.
type mirrored struct {
	*cuda.Backing
	host []byte
}

func newMirrored(t testing.TB, d *cuda.Device, size, n int) *mirrored {
	b, err := d.NewBacking(size, n)
	if err != nil {
		t.Fatal(err)
	}
	return &mirrored{Backing: b, host: make([]byte, size*n)}
}

func (m *mirrored) Block(i int) []byte {
	s := m.BlockSize()
	return m.host[i*s : (i+1)*s : (i+1)*s]
}

func TestGPUPoolConformance(t *testing.T) {
	d := device(t)
	conformance.TestPool(t, func(t *testing.T) *pool.Pool[*mirrored, *mailbox.Transport, lifo.Policy] {
		p, err := pool.New(newMirrored(t, d, 4096, 64), mailbox.New(), lifo.Policy{})
		if err != nil {
			t.Fatal(err)
		}
		return p
	})
}

func TestGPUPoolDeviceAddr(t *testing.T) {
	d := device(t)
	b, err := d.NewBacking(4096, 16)
	if err != nil {
		t.Fatal(err)
	}
	p, err := pool.New(b, mailbox.New(), lifo.Policy{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	h, err := p.Alloc()
	if err != nil {
		t.Fatal(err)
	}
	addr, err := p.DeviceAddr(h)
	if err != nil || cuda.DevicePtr(addr) != b.Ptr(h.Index()) {
		t.Fatalf("DeviceAddr(%v) = %#x, %v; want %#x", h, addr, err, b.Ptr(h.Index()))
	}
	if err := p.Free(h); err != nil {
		t.Fatal(err)
	}
	if _, err := p.DeviceAddr(h); !errors.Is(err, pool.ErrStaleHandle) {
		t.Errorf("DeviceAddr(stale) = %v, want ErrStaleHandle", err)
	}
}

func TestGPUPagesConformance(t *testing.T) {
	d := device(t)
	conformance.TestPages(t, func(t *testing.T, cfg conformance.PagesConfig) *pages.Pool {
		p, err := pages.New(newMirrored(t, d, 16*256, 1), 16, cfg.Options()...)
		if err != nil {
			t.Fatal(err)
		}
		return p
	})
}

// TestGPUPagesOnDevice puts a pages region on the device and writes a run
// through its device address.
func TestGPUPagesOnDevice(t *testing.T) {
	d := device(t)
	c := copier(t, d)
	const page = 64 << 10
	b, err := d.NewBacking(page*32, 1)
	if err != nil {
		t.Fatal(err)
	}
	p, err := pages.New(b, page)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if _, err := p.Alloc(3, pages.DefaultContent); err != nil {
		t.Fatal(err)
	}
	r, err := p.Alloc(5, pages.DefaultContent)
	if err != nil {
		t.Fatal(err)
	}
	first, n, err := p.Span(r)
	if err != nil {
		t.Fatal(err)
	}
	want := random(n*page, 2)
	at := b.Ptr(0).Add(first * page)
	xfer(t, c, cuda.ToDevice, []cuda.Copy{{Dev: at, Host: want}})
	got := make([]byte, len(want))
	xfer(t, c, cuda.ToHost, []cuda.Copy{{Dev: at, Host: got}})
	if !bytes.Equal(got, want) {
		t.Fatal("a pages run on the device did not keep its bytes")
	}
}

// TestGPURoundTrip moves random blocks device → host tier (a registered
// mmap backing) → disk → host → device and compares checksums at the end.
func TestGPURoundTrip(t *testing.T) {
	d := device(t)
	c := copier(t, d)
	const size, n = 256 << 10, 24
	src := random(size*n, 3)
	sum := sha256.Sum256(src)

	dev, err := d.NewBacking(size, n)
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	tier, err := mmap.New(size, n)
	if err != nil {
		t.Fatal(err)
	}
	defer tier.Close()
	reg, err := d.Register(tier)
	if err != nil {
		t.Logf("host registration refused, copying pageable: %v", err)
	} else {
		defer reg.Close()
		if reg.Len() != size*n {
			t.Errorf("registered %d bytes, want exactly %d", reg.Len(), size*n)
		}
	}
	perm := rand.Perm(n) // device block i goes to tier block perm[i]
	copies := func(host func(i int) []byte) []cuda.Copy {
		cs := make([]cuda.Copy, n)
		for i := range cs {
			cs[i] = cuda.Copy{Dev: dev.Ptr(i), Host: host(i)}
		}
		return cs
	}
	xfer(t, c, cuda.ToDevice, copies(func(i int) []byte { return src[i*size : (i+1)*size] }))
	xfer(t, c, cuda.ToHost, copies(func(i int) []byte { return tier.Block(perm[i]) }))

	file := filepath.Join(t.TempDir(), "tier.bin")
	f, err := os.Create(file)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if _, err := f.Write(tier.Block(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		clear(tier.Block(i))
	}
	disk, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		copy(tier.Block(i), disk[i*size:(i+1)*size])
	}

	dev2, err := d.NewBacking(size, n)
	if err != nil {
		t.Fatal(err)
	}
	defer dev2.Close()
	cs := make([]cuda.Copy, n)
	for i := range cs {
		cs[i] = cuda.Copy{Dev: dev2.Ptr(i), Host: tier.Block(perm[i])}
	}
	xfer(t, c, cuda.ToDevice, cs)
	back := make([]byte, size*n)
	for i := range cs {
		cs[i] = cuda.Copy{Dev: dev2.Ptr(i), Host: back[i*size : (i+1)*size]}
	}
	xfer(t, c, cuda.ToHost, cs)
	if got := sha256.Sum256(back); got != sum {
		t.Fatalf("checksum after device → host → disk → host → device: %x, want %x", got, sum)
	}
}

// TestGPUCopier checks batches on every path the driver has: scattered and
// adjacent blocks, both directions, Poll and Wait, and stale job ids.
func TestGPUCopier(t *testing.T) {
	d := device(t)
	paths := []cuda.Path{cuda.Coalesced}
	if d.HasBatchCopy() {
		paths = append(paths, cuda.Batched)
	}
	for _, path := range paths {
		t.Run(path.String(), func(t *testing.T) {
			c := copier(t, d)
			if err := c.SetPath(path); err != nil {
				t.Fatal(err)
			}
			const size, n = 64 << 10, 100
			b, err := d.NewBacking(size, n)
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			src := random(size*n, 4)
			// Even blocks first (scattered), then odd ones, in two jobs.
			var even, odd []cuda.Copy
			for i := range n {
				cp := cuda.Copy{Dev: b.Ptr(i), Host: src[i*size : (i+1)*size]}
				if i%2 == 0 {
					even = append(even, cp)
				} else {
					odd = append(odd, cp)
				}
			}
			j1, err := c.Submit(cuda.ToDevice, even)
			if err != nil {
				t.Fatal(err)
			}
			if path == cuda.Coalesced && c.Calls() != n/2 {
				t.Errorf("scattered blocks: %d calls, want %d", c.Calls(), n/2)
			}
			j2, err := c.Submit(cuda.ToDevice, odd)
			if err != nil {
				t.Fatal(err)
			}
			if err := c.Wait(j2); err != nil {
				t.Fatal(err)
			}
			var done []cuda.Job
			for len(done) == 0 {
				if done, err = c.Poll(done[:0]); err != nil {
					t.Fatal(err)
				}
			}
			if len(done) != 1 || done[0] != j1 || c.Pending() != 0 {
				t.Fatalf("Poll = %v, want [%v]; pending %d", done, j1, c.Pending())
			}
			for _, j := range []cuda.Job{j1, j2, {}} {
				if err := c.Wait(j); !errors.Is(err, cuda.ErrJob) {
					t.Errorf("Wait(%v) after it was reported = %v, want ErrJob", j, err)
				}
			}
			got := make([]byte, size*n)
			xfer(t, c, cuda.ToHost, []cuda.Copy{{Dev: b.Ptr(0), Host: got}})
			if !bytes.Equal(got, src) {
				t.Fatal("the blocks do not hold what the two batches wrote")
			}
		})
	}
}
