package cuda

import (
	"errors"
	"math"
	"runtime"
	"testing"
	"unsafe"
)

func TestResultErrors(t *testing.T) {
	for _, c := range []struct {
		code Result
		want error
		name string
	}{
		{2, ErrOutOfMemory, "CUDA_ERROR_OUT_OF_MEMORY"},
		{100, ErrNoDevice, "CUDA_ERROR_NO_DEVICE"},
		{101, ErrNoDevice, "CUDA_ERROR_INVALID_DEVICE"},
		{34, ErrNoDriver, "CUDA_ERROR_STUB_LIBRARY"},
		{35, ErrNoDriver, "CUDA_ERROR_INSUFFICIENT_DRIVER"},
		{803, ErrNoDriver, "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH"},
		{1, ErrInvalidArgument, "CUDA_ERROR_INVALID_VALUE"},
		{712, ErrInvalidArgument, "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED"},
		{801, errors.ErrUnsupported, "CUDA_ERROR_NOT_SUPPORTED"},
		{700, nil, "CUDA_ERROR_ILLEGAL_ADDRESS"},
		{12345, nil, "CUresult(12345)"},
	} {
		err := check("cuX", c.code)
		if err == nil {
			t.Fatalf("check(%d) = nil", c.code)
		}
		if got := c.code.String(); got != c.name {
			t.Errorf("Result(%d).String() = %q, want %q", c.code, got, c.name)
		}
		for _, s := range []error{ErrOutOfMemory, ErrNoDevice, ErrNoDriver, ErrInvalidArgument, errors.ErrUnsupported, ErrDriverTooOld} {
			if got := errors.Is(err, s); got != (s == c.want) {
				t.Errorf("errors.Is(%v, %v) = %v", err, s, got)
			}
		}
		var ce *Error
		if !errors.As(err, &ce) || ce.Code != c.code || ce.Op != "cuX" {
			t.Errorf("%v is not *Error{cuX, %d}", err, c.code)
		}
	}
	if err := check("cuX", 0); err != nil {
		t.Errorf("check(CUDA_SUCCESS) = %v", err)
	}
}

func TestCoalesce(t *testing.T) {
	const k = 1 << 16
	for _, c := range []struct {
		name string
		dir  Direction
		xs   []xfer
		want []span // nil: want an error
	}{
		{"one", ToDevice, []xfer{{dev: 0x1000, host: 0x9000, n: 10}}, []span{{0x1000, 0x9000, 10}}},
		{"adjacent both sides merge", ToDevice,
			[]xfer{{dev: k, host: 8 * k, n: k}, {dev: 2 * k, host: 9 * k, n: k}, {dev: 3 * k, host: 10 * k, n: k}},
			[]span{{k, 8 * k, 3 * k}}},
		{"out of order still merges", ToHost,
			[]xfer{{dev: 2 * k, host: 9 * k, n: k}, {dev: k, host: 8 * k, n: k}},
			[]span{{8 * k, k, 2 * k}}},
		{"adjacent on one side only", ToDevice,
			[]xfer{{dev: k, host: 8 * k, n: k}, {dev: 2 * k, host: 20 * k, n: k}},
			[]span{{k, 8 * k, k}, {2 * k, 20 * k, k}}},
		{"gap", ToHost,
			[]xfer{{dev: k, host: 8 * k, n: k}, {dev: 2 * k, host: 10 * k, n: k}},
			[]span{{8 * k, k, k}, {10 * k, 2 * k, k}}},
		{"shared source is fine", ToDevice,
			[]xfer{{dev: k, host: 8 * k, n: k}, {dev: 4 * k, host: 8 * k, n: k}},
			[]span{{k, 8 * k, k}, {4 * k, 8 * k, k}}},
		{"overlapping destinations", ToDevice, []xfer{{dev: k, host: 8 * k, n: k}, {dev: k + 1, host: 20 * k, n: k}}, nil},
		{"same destination twice", ToHost, []xfer{{dev: k, host: 8 * k, n: k}, {dev: 3 * k, host: 8 * k, n: k}}, nil},
		{"empty copy", ToDevice, []xfer{{dev: k, host: 8 * k, n: 0}}, nil},
		{"nil device address", ToDevice, []xfer{{dev: 0, host: 8 * k, n: 1}}, nil},
		{"wraps", ToHost, []xfer{{dev: math.MaxUint64 - 2, host: 8 * k, n: 4}}, nil},
		{"empty batch", ToHost, nil, nil},
		{"bad direction", 0, []xfer{{dev: k, host: 8 * k, n: 1}}, nil},
		{"bad direction 3", 3, []xfer{{dev: k, host: 8 * k, n: 1}}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := coalesce(c.dir, c.xs, nil)
			if c.want == nil {
				if !errors.Is(err, ErrInvalidArgument) || len(got) != 0 {
					t.Fatalf("coalesce = %v, %v; want no spans and ErrInvalidArgument", got, err)
				}
				return
			}
			if err != nil || len(got) != len(c.want) {
				t.Fatalf("coalesce = %v, %v; want %v", got, err, c.want)
			}
			for i := range got {
				if got[i] != c.want[i] {
					t.Fatalf("coalesce = %v; want %v", got, c.want)
				}
			}
		})
	}
}

// FuzzCoalesce checks that a batch that passes validation becomes spans that
// move exactly the bytes asked for, with disjoint destinations and nothing
// left to merge; and that one that fails has an empty or overlapping copy.
func FuzzCoalesce(f *testing.F) {
	f.Add([]byte{1, 0, 1, 1, 1, 1, 2, 2, 1}, true)
	f.Add([]byte{3, 3, 1, 1, 1, 1, 0, 0, 2}, false)
	f.Fuzz(func(t *testing.T, data []byte, toDev bool) {
		dir := ToHost
		if toDev {
			dir = ToDevice
		}
		// Three bytes per copy: device slot, host slot, length in slots.
		var xs []xfer
		for i := 0; i+2 < len(data) && len(xs) < 64; i += 3 {
			xs = append(xs, xfer{dev: 64 + uint64(data[i]%32)*8, host: 4096 + uint64(data[i+1]%32)*8, n: uint64(data[i+2]%4) * 8})
		}
		orig := append([]xfer(nil), xs...)
		spans, err := coalesce(dir, xs, nil)
		// The reference: which source byte each destination byte gets.
		from := map[uint64]uint64{}
		valid := len(orig) > 0
		for _, x := range orig {
			d, s := x.dev, x.host
			if !toDev {
				d, s = x.host, x.dev
			}
			if x.n == 0 {
				valid = false
			}
			for k := uint64(0); k < x.n; k++ {
				if _, dup := from[d+k]; dup {
					valid = false
				}
				from[d+k] = s + k
			}
		}
		if !valid {
			if !errors.Is(err, ErrInvalidArgument) {
				t.Fatalf("invalid batch %v: err = %v", orig, err)
			}
			return
		}
		if err != nil {
			t.Fatalf("valid batch %v: %v", orig, err)
		}
		moved := 0
		for i, sp := range spans {
			if i > 0 {
				prev := spans[i-1]
				if sp.dst < prev.dst+prev.n {
					t.Fatalf("spans %v overlap", spans)
				}
				if sp.dst == prev.dst+prev.n && sp.src == prev.src+prev.n {
					t.Fatalf("spans %v left mergeable neighbours", spans)
				}
			}
			for k := uint64(0); k < sp.n; k++ {
				if s, ok := from[sp.dst+k]; !ok || s != sp.src+k {
					t.Fatalf("span %v moves byte %#x from %#x, want %#x (%v)", sp, sp.dst+k, sp.src+k, s, ok)
				}
				moved++
			}
		}
		if moved != len(from) {
			t.Fatalf("spans move %d bytes, batch %d", moved, len(from))
		}
	})
}

func TestJobs(t *testing.T) {
	a := jobs{id: 1}
	b := jobs{id: 2}
	j1, s1 := a.start()
	j2, _ := a.start()
	if j1 == j2 || j1 == (Job{}) {
		t.Fatalf("jobs %v %v", j1, j2)
	}
	if s, err := a.lookup(j1); err != nil || s != s1 {
		t.Fatalf("lookup(%v) = %d, %v", j1, s, err)
	}
	if _, err := b.lookup(j1); !errors.Is(err, ErrJob) {
		t.Errorf("another table's lookup(%v) = %v, want ErrJob", j1, err)
	}
	for _, bad := range []Job{{}, {gen: j1.gen + 1, slot: j1.slot, copier: 1}, {gen: 1, slot: 99, copier: 1}, {gen: 2, slot: j1.slot, copier: 1}} {
		if _, err := a.lookup(bad); !errors.Is(err, ErrJob) {
			t.Errorf("lookup(%v) = %v, want ErrJob", bad, err)
		}
	}
	a.retire(s1)
	if _, err := a.lookup(j1); !errors.Is(err, ErrJob) {
		t.Errorf("lookup of retired %v = %v, want ErrJob", j1, err)
	}
	if len(a.pending) != 1 || a.job(a.pending[0]) != j2 {
		t.Errorf("pending = %v, want [%v]", a.pending, j2)
	}
	j3, s3 := a.start() // reuses slot s1 with a new generation
	if s3 != s1 || j3 == j1 {
		t.Errorf("reused slot %d job %v, first %v", s3, j3, j1)
	}
	if _, err := a.lookup(j1); !errors.Is(err, ErrJob) {
		t.Errorf("stale %v accepted after its slot was reused", j1)
	}
}

// TestLayouts pins the driver structs to cuda.h's sizes on 64-bit platforms.
func TestLayouts(t *testing.T) {
	if unsafe.Sizeof(uintptr(0)) != 8 {
		t.Skip("32-bit platform: the package does not run here")
	}
	for _, c := range []struct {
		name      string
		got, want uintptr
	}{
		{"CUmemAllocationProp", unsafe.Sizeof(memAllocationProp{}), 32},
		{"CUmemAccessDesc", unsafe.Sizeof(memAccessDesc{}), 12},
		{"CUmemcpyAttributes", unsafe.Sizeof(memcpyAttributes{}), 24},
		{"CUmemAllocationProp.allocFlags", unsafe.Offsetof(memAllocationProp{}.compressionType), 24},
	} {
		if c.got != c.want {
			t.Errorf("%s: %d bytes, want %d", c.name, c.got, c.want)
		}
	}
}

// TestNoDriver checks that where there is no driver (or no GPU) every entry
// point fails with a sentinel error instead of crashing.
func TestNoDriver(t *testing.T) {
	d, err := Open(0)
	if err == nil {
		d.Close()
		t.Skip("a GPU is present: the GPU tests cover it")
	}
	if !errors.Is(err, ErrNoDriver) && !errors.Is(err, ErrNoDevice) {
		t.Fatalf("Open(0) = %v, want ErrNoDriver or ErrNoDevice", err)
	}
	if runtime.GOOS != "linux" && !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("Open(0) on %s = %v, want errors.ErrUnsupported", runtime.GOOS, err)
	}
	if _, err2 := Devices(); err2 == nil && errors.Is(err, ErrNoDriver) {
		t.Errorf("Devices() = nil error, Open %v", err)
	}
	t.Logf("no GPU here, as expected: %v", err)
}

// TestValidation checks the arguments that are refused before any driver
// call, with no driver loaded.
func TestValidation(t *testing.T) {
	d := &Device{gran: 2 << 20, drv: &driver{version: 12040}}
	for _, size := range []int64{0, -1, math.MaxInt64} {
		if _, err := d.NewRegion(size); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("NewRegion(%d) = %v, want ErrInvalidArgument", size, err)
		}
	}
	for _, c := range [][2]int{{0, 1}, {1, 0}, {-1, 4}, {math.MaxInt / 2, 3}} {
		if _, err := d.NewBacking(c[0], c[1]); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("NewBacking(%d, %d) = %v, want ErrInvalidArgument", c[0], c[1], err)
		}
	}
	if _, err := d.Register(nil); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("Register(nil) = %v", err)
	}
	if _, err := d.Register(span0{}); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("Register(empty) = %v", err)
	}
	c := &Copier{d: d, jobs: jobs{id: copierIDs.Next()}, path: Coalesced}
	if err := c.SetPath(Batched); !errors.Is(err, ErrDriverTooOld) {
		t.Errorf("SetPath(Batched) on 12.4 = %v, want ErrDriverTooOld", err)
	}
	if err := c.SetPath(0); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("SetPath(0) = %v", err)
	}
	buf := make([]byte, 64)
	for _, b := range [][]Copy{
		nil,
		{{Dev: 0, Host: buf}},
		{{Dev: 0x1000, Host: nil}},
		{{Dev: 0x1000, Host: buf}, {Dev: 0x1020, Host: buf[:8]}},
	} {
		if _, err := c.Submit(ToDevice, b); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("Submit(%v) = %v, want ErrInvalidArgument", b, err)
		}
	}
	if _, err := c.Submit(Direction(9), []Copy{{Dev: 0x1000, Host: buf}}); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("Submit(bad direction) = %v", err)
	}
	if c.Pending() != 0 {
		t.Errorf("refused batches left %d jobs pending", c.Pending())
	}
	if err := c.Wait(Job{}); !errors.Is(err, ErrJob) {
		t.Errorf("Wait(Job{}) = %v, want ErrJob", err)
	}
	if err := c.Wait(Job{gen: 1, copier: c.jobs.id + 1}); !errors.Is(err, ErrJob) {
		t.Errorf("Wait(foreign) = %v, want ErrJob", err)
	}
}

type span0 struct{}

func (span0) Span() (uintptr, int) { return 0, 0 }

func TestStrings(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{ToDevice.String(), "to-device"},
		{ToHost.String(), "to-host"},
		{Direction(7).String(), "Direction(7)"},
		{Batched.String(), "cuMemcpyBatchAsync"},
		{Coalesced.String(), "coalesced cuMemcpyAsync"},
		{Path(9).String(), "Path(9)"},
		{versionString(12080), "12.8"},
		{versionString(13000), "13.0"},
		{(&Error{Op: "cuMemCreate", Code: 2}).Error(), "cuda: cuMemCreate: CUDA_ERROR_OUT_OF_MEMORY (2)"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
	if DevicePtr(0x1000).Add(16) != 0x1010 {
		t.Error("DevicePtr.Add")
	}
}
