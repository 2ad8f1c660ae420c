package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"time"

	"github.com/locus-go/locus/backing/cuda"
	"github.com/locus-go/locus/backing/mmap"
)

const (
	kib = 1 << 10
	mib = 1 << 20
	gib = 1 << 30
)

// run is one measuring session: the device, the deadline and the log.
type run struct {
	d     *cuda.Device
	c     *cuda.Copier
	res   *Results
	start time.Time
	stop  time.Time
	log   io.Writer
}

func measure(budget time.Duration, log io.Writer) *Results {
	r := &run{res: &Results{When: now(), Measurements: []Measurement{}}, start: time.Now(), log: log}
	r.stop = r.start.Add(budget)
	defer func() { r.res.Seconds = time.Since(r.start).Seconds() }()
	d, err := cuda.Open(0)
	if err != nil {
		r.res.Error = err.Error()
		return r.res
	}
	defer d.Close()
	r.d = d
	r.res.GPU, r.res.DriverVersion, r.res.BatchCopy = d.Name(), d.DriverVersion(), d.HasBatchCopy()
	r.res.MemoryMiB, r.res.GranularityKi = d.Memory()>>20, d.Granularity()>>10
	if r.c, err = d.NewCopier(); err != nil {
		r.res.Error = err.Error()
		return r.res
	}
	defer r.c.Close()

	r.res.RoundTrip = r.roundTrip()
	r.maps()
	r.registration()
	r.bandwidth()
	r.batched()
	return r.res
}

// add records a measurement: fn returns one value per repetition.
func (r *run) add(group, name, unit, note string, reps int, fn func() (float64, error)) {
	m := Measurement{Group: group, Name: name, Unit: unit, Note: note}
	if time.Now().After(r.stop) {
		m.Error = "skipped: time budget spent"
	} else {
		var vals []float64
		for range reps {
			v, err := fn()
			if err != nil {
				m.Error = err.Error()
				break
			}
			vals = append(vals, v)
		}
		m.summarize(vals)
	}
	fmt.Fprintf(r.log, "%6.1fs  %s / %s: %.4g %s %s\n", time.Since(r.start).Seconds(), group, name, m.Median, unit, m.Error)
	r.res.Measurements = append(r.res.Measurements, m)
}

// copyWait submits one batch and waits for it, returning the seconds.
func (r *run) copyWait(dir cuda.Direction, copies []cuda.Copy) (float64, error) {
	t0 := time.Now()
	j, err := r.c.Submit(dir, copies)
	if err != nil {
		return 0, err
	}
	if err := r.c.Wait(j); err != nil {
		return 0, err
	}
	return time.Since(t0).Seconds(), nil
}

func (r *run) roundTrip() *RoundTrip {
	const size, n = 2 * mib, 64
	rt := &RoundTrip{Bytes: size * n}
	fail := func(err error) *RoundTrip { rt.Error = err.Error(); return rt }
	src := make([]byte, size*n)
	rand.NewChaCha8([32]byte{7}).Read(src)
	want := sha256.Sum256(src)
	rt.SHA256 = hex.EncodeToString(want[:])
	dev, err := r.d.NewBacking(size, n)
	if err != nil {
		return fail(err)
	}
	defer dev.Close()
	tier, err := mmap.New(size, n, mmap.WithPrefault())
	if err != nil {
		return fail(err)
	}
	defer tier.Close()
	if reg, err := r.d.Register(tier); err == nil {
		rt.Registered = true
		defer reg.Close()
	} else {
		fmt.Fprintf(r.log, "round trip: registration refused, going on unregistered: %v\n", err)
	}
	perm := rand.Perm(n)
	cs := make([]cuda.Copy, n)
	step := func(dir cuda.Direction, host func(i int) []byte) error {
		for i := range cs {
			cs[i] = cuda.Copy{Dev: dev.Ptr(i), Host: host(i)}
		}
		_, err := r.copyWait(dir, cs)
		return err
	}
	if err := step(cuda.ToDevice, func(i int) []byte { return src[i*size : (i+1)*size] }); err != nil {
		return fail(err)
	}
	if err := step(cuda.ToHost, func(i int) []byte { return tier.Block(perm[i]) }); err != nil {
		return fail(err)
	}
	file := filepath.Join(os.TempDir(), fmt.Sprintf("locus-cuda-%d.bin", os.Getpid()))
	defer os.Remove(file)
	var disk bytes.Buffer
	for i := range n {
		disk.Write(tier.Block(i))
		clear(tier.Block(i))
	}
	if err := os.WriteFile(file, disk.Bytes(), 0o600); err != nil {
		return fail(err)
	}
	back, err := os.ReadFile(file)
	if err != nil {
		return fail(err)
	}
	for i := range n {
		copy(tier.Block(i), back[i*size:(i+1)*size])
	}
	// Zero the device blocks (sleep and wake) so the bytes must come back
	// from the tier.
	if err := dev.Region().Sleep(); err != nil {
		return fail(err)
	}
	if err := dev.Region().Wake(); err != nil {
		return fail(err)
	}
	if err := step(cuda.ToDevice, func(i int) []byte { return tier.Block(perm[i]) }); err != nil {
		return fail(err)
	}
	clear(src)
	if err := step(cuda.ToHost, func(i int) []byte { return src[i*size : (i+1)*size] }); err != nil {
		return fail(err)
	}
	rt.OK = sha256.Sum256(src) == want
	return rt
}

func (r *run) maps() {
	for _, size := range []int64{2 * mib, 64 * mib, gib} {
		name := sizeName(size)
		r.add("Device mapping (cuMemAddressReserve + cuMemCreate + cuMemMap + cuMemSetAccess + zeroing)", "new region "+name, "ms", "", 5, func() (float64, error) {
			t0 := time.Now()
			reg, err := r.d.NewRegion(size)
			if err != nil {
				return 0, err
			}
			ms := float64(time.Since(t0).Microseconds()) / 1e3
			return ms, reg.Close()
		})
	}
	reg, err := r.d.NewRegion(gib)
	if err != nil {
		r.add("Device mapping (cuMemAddressReserve + cuMemCreate + cuMemMap + cuMemSetAccess + zeroing)", "sleep + wake 1 GiB", "ms", "", 0, func() (float64, error) { return 0, err })
		return
	}
	defer reg.Close()
	r.add("Device mapping (cuMemAddressReserve + cuMemCreate + cuMemMap + cuMemSetAccess + zeroing)", "sleep + wake 1 GiB", "ms", "unmap + release, then create + map + zero at the same addresses", 5, func() (float64, error) {
		t0 := time.Now()
		if err := reg.Sleep(); err != nil {
			return 0, err
		}
		if err := reg.Wake(); err != nil {
			return 0, err
		}
		return float64(time.Since(t0).Microseconds()) / 1e3, nil
	})
}

func (r *run) registration() {
	for _, c := range []struct {
		size int64 // int64: 8 GiB overflows int on 32-bit platforms
		reps int
	}{{gib, 5}, {8 * gib, 2}} {
		name := sizeName(c.size)
		m, err := mmap.New(int(c.size), 1, mmap.WithPrefault())
		if err != nil {
			r.add("Host registration (cuMemHostRegister of a prefaulted mmap backing, exact size)", "register "+name, "GB/s", "", 0, func() (float64, error) { return 0, err })
			continue
		}
		r.add("Host registration (cuMemHostRegister of a prefaulted mmap backing, exact size)", "register "+name, "GB/s", "unregistered after each rep", c.reps, func() (float64, error) {
			t0 := time.Now()
			reg, err := r.d.Register(m)
			if err != nil {
				return 0, err
			}
			gbs := float64(c.size) / time.Since(t0).Seconds() / 1e9
			return gbs, reg.Close()
		})
		m.Close()
	}
}

// bandwidth copies one block per call (blocks spaced apart so nothing
// coalesces), 256 MiB per rep, registered against pageable host memory.
func (r *run) bandwidth() {
	const span = 512 * mib // every other block of 256 MiB worth
	group := "Host ↔ device bandwidth, one cuMemcpyAsync per block, 256 MiB per rep"
	dev, err := r.d.NewRegion(span)
	if err != nil {
		r.add(group, "device region", "GB/s", "", 0, func() (float64, error) { return 0, err })
		return
	}
	defer dev.Close()
	pinned, err := mmap.New(span, 1, mmap.WithPrefault())
	if err != nil {
		r.add(group, "host mmap", "GB/s", "", 0, func() (float64, error) { return 0, err })
		return
	}
	defer pinned.Close()
	reg, regErr := r.d.Register(pinned)
	if regErr == nil {
		defer reg.Close()
	}
	pageable := make([]byte, span)
	for i := range pageable { // fault it in, as the mmap was
		pageable[i] = byte(i)
	}
	for _, size := range []int{64 * kib, 256 * kib, mib, 4 * mib, 16 * mib} {
		for _, host := range []struct {
			name string
			mem  []byte
			err  error
		}{{"registered", pinned.Block(0), regErr}, {"pageable", pageable, nil}} {
			for _, dir := range []cuda.Direction{cuda.ToDevice, cuda.ToHost} {
				name := fmt.Sprintf("%s %s, %s blocks", host.name, dir, sizeName(int64(size)))
				var cs []cuda.Copy
				for off := 0; off+size <= span; off += 2 * size {
					cs = append(cs, cuda.Copy{Dev: dev.Ptr().Add(off), Host: host.mem[off : off+size]})
				}
				total := float64(len(cs) * size)
				r.add(group, name, "GB/s", fmt.Sprintf("%d calls", len(cs)), 5, func() (float64, error) {
					if host.err != nil {
						return 0, host.err
					}
					s, err := r.copyWait(dir, cs)
					return total / s / 1e9, err
				})
			}
		}
	}
}

// batched copies 1,000 scattered blocks in one batch per direction, on each
// path the driver has.
func (r *run) batched() {
	group := "Batched copy of 1,000 scattered blocks, one batch per direction (registered host)"
	paths := []cuda.Path{cuda.Coalesced}
	if r.d.HasBatchCopy() {
		paths = []cuda.Path{cuda.Batched, cuda.Coalesced}
	}
	for _, size := range []int{2 * mib, 64 * kib} {
		const n = 1000
		dev, err := r.d.NewBacking(size, n)
		if err != nil {
			r.add(group, "device blocks "+sizeName(int64(size)), "GB/s", "", 0, func() (float64, error) { return 0, err })
			continue
		}
		host, err := mmap.New(size, n, mmap.WithPrefault())
		if err != nil {
			dev.Close()
			r.add(group, "host blocks "+sizeName(int64(size)), "GB/s", "", 0, func() (float64, error) { return 0, err })
			continue
		}
		reg, regErr := r.d.Register(host)
		perm := rand.Perm(n) // scattered: no two neighbours coalesce
		cs := make([]cuda.Copy, n)
		for i := range cs {
			cs[i] = cuda.Copy{Dev: dev.Ptr(i), Host: host.Block(perm[i])}
		}
		for _, path := range paths {
			for _, dir := range []cuda.Direction{cuda.ToDevice, cuda.ToHost} {
				name := fmt.Sprintf("1000 × %s %s, %s", sizeName(int64(size)), dir, path)
				r.add(group, name, "GB/s", "", 5, func() (float64, error) {
					if regErr != nil {
						return 0, regErr
					}
					if err := r.c.SetPath(path); err != nil {
						return 0, err
					}
					s, err := r.copyWait(dir, cs)
					return float64(n*size) / s / 1e9, err
				})
				if m := &r.res.Measurements[len(r.res.Measurements)-1]; m.Error == "" {
					m.Note = fmt.Sprintf("%d driver calls", r.c.Calls())
				}
			}
		}
		_ = r.c.SetPath(paths[0])
		if regErr == nil {
			reg.Close()
		}
		host.Close()
		dev.Close()
	}
}

func sizeName(n int64) string {
	switch {
	case n >= gib && n%gib == 0:
		return fmt.Sprintf("%d GiB", n/gib)
	case n >= mib && n%mib == 0:
		return fmt.Sprintf("%d MiB", n/mib)
	}
	return fmt.Sprintf("%d KiB", n/kib)
}
