package cuda

import (
	"errors"
	"fmt"
	"runtime"
	"unsafe"
)

// Path is how a Copier issues a batch.
type Path uint8

// The copy paths.
const (
	// Batched issues the whole batch in one cuMemcpyBatchAsync call (CUDA
	// 12.8+ drivers).
	Batched Path = iota + 1
	// Coalesced issues one cuMemcpyHtoDAsync or cuMemcpyDtoHAsync per run
	// of adjacent blocks.
	Coalesced
)

// String returns "cuMemcpyBatchAsync" or "coalesced cuMemcpyAsync".
func (p Path) String() string {
	switch p {
	case Batched:
		return "cuMemcpyBatchAsync"
	case Coalesced:
		return "coalesced cuMemcpyAsync"
	}
	return fmt.Sprintf("Path(%d)", uint8(p))
}

// Copier copies batches of blocks between device and host memory on a
// stream of its own, asynchronously. It belongs to one goroutine at a time
// (the owner, typically the scheduler, once per step per direction).
//
// Submit issues a batch and returns at once with a Job; Poll reports the
// jobs that have finished, without blocking; Wait blocks until one has. Jobs
// finish in submission order. A batch's host memory must stay untouched,
// and its device memory mapped, until its job has been reported finished.
type Copier struct {
	d      *Device
	stream uintptr
	path   Path
	jobs   jobs
	slots  []copySlot // by job slot
	closed bool

	// Scratch reused by every Submit.
	xs         []xfer
	spans      []span
	dsts, srcs []uint64
	sizes      []uintptr
	lastCalls  int
	failIdx    uintptr
	attrs      memcpyAttributes
	attrIdx    uintptr
}

type copySlot struct {
	event uintptr // CUevent, created on first use and reused
	pins  runtime.Pinner
}

// NewCopier creates a copier with a non-blocking stream on d. It uses the
// Batched path where the driver has it and Coalesced otherwise.
func (d *Device) NewCopier() (*Copier, error) {
	c := &Copier{d: d, path: Coalesced, jobs: jobs{id: copierIDs.Next()}}
	if d.HasBatchCopy() {
		c.path = Batched
	}
	err := d.do(func() error {
		// Safe: &c.stream is converted in the call expression (see call).
		return check("cuStreamCreate", call(d.drv.p.streamCreate, uintptr(unsafe.Pointer(&c.stream)), streamNonBlocking))
	})
	if err != nil {
		return nil, err
	}
	return c, nil
}

// Path returns the path later batches take.
func (c *Copier) Path() Path {
	if c == nil {
		return 0
	}
	return c.path
}

// unusable reports a nil, zero (not made by NewCopier) or closed Copier.
func (c *Copier) unusable() bool { return c == nil || c.d == nil || c.closed }

// SetPath chooses the path for later batches, to compare them. Batched
// fails with an error wrapping ErrDriverTooOld on drivers before CUDA 12.8.
func (c *Copier) SetPath(p Path) error {
	switch {
	case c.unusable():
		return ErrClosed
	case p == Batched && !c.d.HasBatchCopy():
		return fmt.Errorf("%w: cuMemcpyBatchAsync needs a CUDA 12.8 driver, this one is %s",
			ErrDriverTooOld, versionString(c.d.drv.version))
	case p != Batched && p != Coalesced:
		return fmt.Errorf("%w: path %v", ErrInvalidArgument, p)
	}
	c.path = p
	return nil
}

// Calls returns how many copy calls the last Submit made into the driver:
// 1 on the Batched path, the number of runs of adjacent blocks on the
// Coalesced path.
func (c *Copier) Calls() int {
	if c == nil {
		return 0
	}
	return c.lastCalls
}

// Submit issues one batch of copies in direction dir and records an event
// after it. It validates the whole batch first and fails with an error
// wrapping ErrInvalidArgument, issuing nothing, if dir is invalid, the batch
// is empty or larger than MaxBatch, a copy is empty or has a nil device
// address, or two copies write the same bytes. Device addresses are checked
// by the driver.
//
// A failure after validation (the driver refused a copy) may leave part of
// the batch issued; the stream still orders later batches after it.
func (c *Copier) Submit(dir Direction, copies []Copy) (Job, error) {
	if c.unusable() {
		return Job{}, ErrClosed
	}
	c.xs = c.xs[:0]
	for _, cp := range copies {
		x := xfer{dev: uint64(cp.Dev), n: uint64(len(cp.Host))}
		if x.n > 0 {
			x.host = hostAddr(cp.Host)
		}
		c.xs = append(c.xs, x)
	}
	var err error
	if c.spans, err = coalesce(dir, c.xs, c.spans); err != nil {
		return Job{}, err
	}
	job, s := c.jobs.start()
	if int(s) == len(c.slots) {
		c.slots = append(c.slots, copySlot{})
	}
	slot := &c.slots[s]
	for _, cp := range copies {
		// Go memory the driver reads or writes after Submit returns must not
		// move; for mappings Pin does nothing.
		slot.pins.Pin(unsafe.SliceData(cp.Host))
	}
	err = c.d.do(func() error {
		if slot.event == 0 {
			// Safe: &slot.event is converted in the call expression.
			if err := check("cuEventCreate", call(c.d.drv.p.eventCreate, uintptr(unsafe.Pointer(&slot.event)), eventDisableTiming)); err != nil {
				return err
			}
		}
		var err error
		if c.path == Batched {
			err = c.batch(dir)
		} else {
			err = c.runs(dir)
		}
		if err != nil {
			return err
		}
		return check("cuEventRecord", call(c.d.drv.p.eventRecord, slot.event, c.stream))
	})
	if err != nil {
		// What was issued may still run: wait for it before unpinning.
		_ = c.d.do(func() error { return check("cuStreamSynchronize", call(c.d.drv.p.streamSynchronize, c.stream)) })
		slot.pins.Unpin()
		c.jobs.retire(s)
		return Job{}, err
	}
	return job, nil
}

// runs issues one async copy per coalesced span.
func (c *Copier) runs(dir Direction) error {
	p := &c.d.drv.p
	c.lastCalls = 0
	for _, sp := range c.spans {
		var err error
		c.lastCalls++
		if dir == ToDevice {
			err = check("cuMemcpyHtoDAsync", call(p.memcpyHtoDAsync, uintptr(sp.dst), uintptr(sp.src), uintptr(sp.n), c.stream))
		} else {
			err = check("cuMemcpyDtoHAsync", call(p.memcpyDtoHAsync, uintptr(sp.dst), uintptr(sp.src), uintptr(sp.n), c.stream))
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// batch issues the coalesced spans in one cuMemcpyBatchAsync call (the 12.8
// ABI, with failIdx), with one attribute for all: sources read in stream
// order, and where source and destination are.
func (c *Copier) batch(dir Direction) error {
	c.dsts, c.srcs, c.sizes = c.dsts[:0], c.srcs[:0], c.sizes[:0]
	for _, sp := range c.spans {
		c.dsts = append(c.dsts, sp.dst)
		c.srcs = append(c.srcs, sp.src)
		c.sizes = append(c.sizes, uintptr(sp.n))
	}
	dev := int32(c.d.ordinal)
	c.attrs = memcpyAttributes{srcAccessOrder: srcAccessOrderStream,
		srcLocType: locationTypeHost, dstLocType: locationTypeDevice, dstLocID: dev}
	if dir == ToHost {
		c.attrs.srcLocType, c.attrs.srcLocID = locationTypeDevice, dev
		c.attrs.dstLocType, c.attrs.dstLocID = locationTypeHost, 0
	}
	c.attrIdx, c.failIdx = 0, 0
	c.lastCalls = 1
	// Safe: every pointer is converted in the call expression, into slices
	// and fields the copier owns; the driver reads them during the call.
	err := check("cuMemcpyBatchAsync", call(c.d.drv.p.memcpyBatchAsync,
		uintptr(unsafe.Pointer(&c.dsts[0])), uintptr(unsafe.Pointer(&c.srcs[0])), uintptr(unsafe.Pointer(&c.sizes[0])),
		uintptr(len(c.spans)), uintptr(unsafe.Pointer(&c.attrs)), uintptr(unsafe.Pointer(&c.attrIdx)), 1,
		uintptr(unsafe.Pointer(&c.failIdx)), c.stream))
	if err != nil {
		return fmt.Errorf("%w (copy %d of %d)", err, c.failIdx, len(c.spans))
	}
	return nil
}

// Poll appends the jobs that have finished since the last Poll or Wait to
// done, oldest first, and returns it. It never blocks: one cuEventQuery per
// pending job at most, stopping at the first still running. A job whose
// copies failed on the device is reported with the error.
func (c *Copier) Poll(done []Job) ([]Job, error) {
	if c.unusable() {
		return done, ErrClosed
	}
	if len(c.jobs.pending) == 0 {
		return done, nil
	}
	var failed error
	err := c.d.do(func() error {
		for len(c.jobs.pending) > 0 {
			s := c.jobs.pending[0]
			r := call(c.d.drv.p.eventQuery, c.slots[s].event)
			if r == resultNotReady {
				return nil
			}
			if r != resultSuccess && failed == nil {
				failed = fmt.Errorf("%v: %w", c.jobs.job(s), check("cuEventQuery", r))
			}
			done = append(done, c.jobs.job(s))
			c.finish(s)
		}
		return nil
	})
	if err != nil {
		return done, err
	}
	return done, failed
}

// Wait blocks until job j has finished and reports it finished; Poll will
// not report it again. It fails with an error wrapping ErrJob for a job that
// is not pending on this copier (stale, forged or another copier's).
func (c *Copier) Wait(j Job) error {
	if c.unusable() {
		return ErrClosed
	}
	s, err := c.jobs.lookup(j)
	if err != nil {
		return err
	}
	err = c.d.do(func() error {
		return check("cuEventSynchronize", call(c.d.drv.p.eventSynchronize, c.slots[s].event))
	})
	if errors.Is(err, ErrClosed) {
		return err
	}
	// Finished, or failed on the device: either way the job is over.
	c.finish(s)
	return err
}

// finish unpins a finished job's memory and retires its id.
func (c *Copier) finish(s uint32) {
	c.slots[s].pins.Unpin()
	c.jobs.retire(s)
}

// Pending returns how many jobs have not been reported finished.
func (c *Copier) Pending() int {
	if c == nil {
		return 0
	}
	return len(c.jobs.pending)
}

// Close waits for every pending job, destroys the stream and the events,
// and forgets the jobs. Later calls do nothing.
func (c *Copier) Close() error {
	if c == nil || c.d == nil || c.closed {
		return nil
	}
	c.closed = true
	p := &c.d.drv.p
	err := c.d.do(func() error {
		err := check("cuStreamSynchronize", call(p.streamSynchronize, c.stream))
		for i := range c.slots {
			if c.slots[i].event != 0 {
				call(p.eventDestroy, c.slots[i].event)
			}
		}
		if e := check("cuStreamDestroy", call(p.streamDestroy, c.stream)); err == nil {
			err = e
		}
		return err
	})
	for i := range c.slots {
		c.slots[i].pins.Unpin()
	}
	return err
}
