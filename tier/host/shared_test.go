package host_test

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/locus-go/locus/backing/mmap"
	"github.com/locus-go/locus/conformance"
	"github.com/locus-go/locus/pool"
	"github.com/locus-go/locus/tier"
	"github.com/locus-go/locus/tier/host"
	"github.com/locus-go/locus/tier/internal/crashtest"
)

// shmPath is a fresh file name in /dev/shm (a tmpfs) where it exists,
// else in the test's temporary directory; removed when the test ends.
func shmPath(t testing.TB) string {
	t.Helper()
	dir := ""
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		if d, err := os.MkdirTemp("/dev/shm", "locus-host-test-"); err == nil {
			t.Cleanup(func() { _ = os.RemoveAll(d) })
			dir = d
		}
	}
	if dir == "" {
		dir = t.TempDir()
	}
	return filepath.Join(dir, "host")
}

func skipOffLinux(t testing.TB) {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("shared files are Linux only")
	}
}

// testBinary returns the path of the test binary, for a test that
// re-executes it; it skips the test in -short mode or where the path is
// unknown.
func testBinary(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("re-executes the test binary")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Skip(err)
	}
	return exe
}

func key(i int) tier.Key { return tier.KeyOf([]byte("host-block-"+strconv.Itoa(i)), 0) }

func block(k tier.Key, bs int) []byte {
	b := make([]byte, bs)
	for i := range b {
		b[i] = k.Hash[i%32] ^ byte(i/5)
	}
	return b
}

func newShared(t testing.TB, path string, bs, rows int) *host.Tier {
	t.Helper()
	st, err := host.New(bs, rows, host.WithSharedFile(path), host.WithPrefault())
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// drain applies completions until n jobs are done.
func drain(t testing.TB, m *tier.Manager, n int) {
	t.Helper()
	for got := 0; got < n; {
		done, err := m.Drain(nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range done {
			if !d.OK {
				t.Fatalf("job %+v failed", d)
			}
		}
		got += len(done)
		if len(done) == 0 {
			time.Sleep(100 * time.Microsecond)
		}
	}
}

func TestTierShared(t *testing.T) {
	skipOffLinux(t)
	conformance.TestTier(t, func(t *testing.T) *tier.Manager {
		m, err := tier.New(newShared(t, shmPath(t), 512, 24), tier.WithWorkers(2))
		if err != nil {
			t.Fatal(err)
		}
		return m
	})
}

// Two tiers over one file in one process: the second is refused while the
// first has it, then, once the first is closed, serves what it stored,
// from the same rows; a Reset is kept in the file too.
func TestSharedRecovery(t *testing.T) {
	skipOffLinux(t)
	const bs, rows = 4096 + 100, 16 // not whole pages: exact capacity
	path := shmPath(t)
	a := newShared(t, path, bs, rows)
	if a.Bytes() != bs*rows || a.SharedFile() != path {
		t.Fatalf("Bytes %d, SharedFile %q", a.Bytes(), a.SharedFile())
	}
	if _, err := host.New(bs, rows, host.WithSharedFile(path)); !errors.Is(err, mmap.ErrFileLocked) {
		t.Fatalf("second owner: %v, want mmap.ErrFileLocked", err)
	}
	m, err := tier.New(a, tier.WithWorkers(2))
	if err != nil {
		t.Fatal(err)
	}
	var ks []tier.Key
	var srcs [][]byte
	for i := range 10 {
		ks = append(ks, key(i))
		srcs = append(srcs, block(key(i), bs))
	}
	if _, err := m.Store(ks, srcs); err != nil {
		t.Fatal(err)
	}
	drain(t, m, 1)
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}

	b := newShared(t, path, bs, rows)
	if r := b.Recovery(); r != (host.Recovery{Recovered: 10, Empty: 6}) {
		t.Fatalf("recovery %+v", r)
	}
	m, err = tier.New(b)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range m.Lookup(ks, nil) {
		if r != tier.Hit {
			t.Fatalf("key %d after reopening: %v", i, r)
		}
	}
	dsts := make([][]byte, len(ks))
	for i := range dsts {
		dsts[i] = make([]byte, bs)
	}
	if _, err := m.Load(ks, dsts); err != nil {
		t.Fatal(err)
	}
	drain(t, m, 1)
	for i := range ks {
		if !bytes.Equal(dsts[i], srcs[i]) {
			t.Fatalf("block %d differs after reopening", i)
		}
	}
	// A new block takes a generation above the recovered ones.
	if _, err := m.Store([]tier.Key{key(99)}, [][]byte{block(key(99), bs)}); err != nil {
		t.Fatal(err)
	}
	drain(t, m, 1)
	if err := m.Reset(); err != nil {
		t.Fatal(err)
	}
	_ = m.Close()
	c := newShared(t, path, bs, rows)
	if r := c.Recovery(); r != (host.Recovery{Stale: 11, Empty: 5}) {
		t.Fatalf("after Reset: %+v", r)
	}
	_ = c.Close()
	c = newShared(t, path, bs, rows)
	if r := c.Recovery(); r != (host.Recovery{Empty: 16}) {
		t.Fatalf("stale rows are cleared once found: %+v", r)
	}
	_ = c.Close()
}

func TestSharedRefused(t *testing.T) {
	path := shmPath(t)
	if runtime.GOOS != "linux" {
		if _, err := host.New(4096, 4, host.WithSharedFile(path)); !errors.Is(err, errors.ErrUnsupported) {
			t.Fatalf("off Linux: %v, want errors.ErrUnsupported", err)
		}
		return
	}
	if _, err := host.New(4096, 4, host.WithSharedFile(path), host.WithHeap()); !errors.Is(err, pool.ErrInvalidConfig) {
		t.Errorf("with WithHeap: %v", err)
	}
	st := newShared(t, path, 4096, 4)
	_ = st.Close()
	// Another geometry: another size (refused by mmap), or the same size
	// under another row count (refused by the superblock).
	for _, g := range [][2]int{{4096, 5}, {2048, 8}} {
		if _, err := host.New(g[0], g[1], host.WithSharedFile(path)); !errors.Is(err, pool.ErrInvalidConfig) {
			t.Errorf("%d rows of %d bytes over a file of 4 of 4096: %v", g[1], g[0], err)
		}
	}
	// A torn superblock (a crash mid-Reset): every row is dropped.
	st = newShared(t, path, 4096, 4)
	m, _ := tier.New(st)
	_, _ = m.Store([]tier.Key{key(1)}, [][]byte{block(key(1), 4096)})
	drain(t, m, 1)
	_ = m.Close()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = f.WriteAt([]byte{0xFF}, 17)
	_ = f.Close()
	st = newShared(t, path, 4096, 4)
	if r := st.Recovery(); r != (host.Recovery{Discarded: 1, Empty: 3}) {
		t.Errorf("torn superblock: %+v", r)
	}
	// The generations go on above the dropped rows' (a reader that held
	// one of those rows never sees its key and generation again).
	if _, next := st.Recovered(); next <= 1 {
		t.Errorf("after a torn superblock the next generation is %d, not above the dropped row's", next)
	}
	_ = st.Close()
}

// The crash test: a child process (this test binary) stores large blocks
// into a shared host tier, one at a time, logging "B slot key" before each
// write and "D slot key" after it; the parent kills it with SIGKILL at a
// random moment, reopens the file and checks that every block written to
// completion is recovered with its exact bytes, and the row in flight holds
// the new block whole, the old one (the kill came before the write began)
// or nothing: never a torn block.

const crashRows, crashBS = 12, 1 << 20

func TestSharedCrashChild(t *testing.T) {
	path := os.Getenv("LOCUS_HOST_CRASH_FILE")
	if path == "" {
		t.Skip("run by TestSharedCrash")
	}
	seed, _ := strconv.Atoi(os.Getenv("LOCUS_HOST_CRASH_SEED"))
	st, err := host.New(crashBS, crashRows, host.WithSharedFile(path))
	if err != nil {
		crashtest.Exit(err)
	}
	m, err := tier.New(logged{st}, tier.WithWorkers(1))
	if err != nil {
		crashtest.Exit(err)
	}
	crashtest.Child(m, seed, key, func(k tier.Key) []byte { return block(k, crashBS) })
}

// logged reports each write on stdout.
type logged struct{ *host.Tier }

func (l logged) WriteSlot(slot int, k tier.Key, gen uint64, src []byte) error {
	crashtest.Before(slot, k)
	err := l.Tier.WriteSlot(slot, k, gen, src)
	crashtest.After(slot, k)
	return err
}

func TestSharedCrash(t *testing.T) {
	skipOffLinux(t)
	exe := testBinary(t)
	caught := 0
	for run := range 6 {
		path := shmPath(t)
		state := make([]string, crashRows) // by the log: a key's hash in hex or ""
		for life := range 3 {
			env := []string{"LOCUS_HOST_CRASH_FILE=" + path, "LOCUS_HOST_CRASH_SEED=" + strconv.Itoa(run*10+life+1)}
			lg, err := crashtest.Run(exe, "TestSharedCrashChild", env, time.Duration(rand.IntN(60)+30)*time.Millisecond, state)
			if err != nil {
				t.Fatal(err)
			}
			inflight, old, newKey := lg.Inflight, lg.Old, lg.New
			st := newShared(t, path, crashBS, crashRows)
			rec, _ := st.Recovered()
			got := map[int]string{}
			m, err := tier.New(st)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range rec {
				got[r.Slot] = fmt.Sprintf("%x", r.Key.Hash)
				dst := make([]byte, crashBS)
				if _, err := m.Load([]tier.Key{r.Key}, [][]byte{dst}); err != nil {
					t.Fatal(err)
				}
				drain(t, m, 1)
				if !bytes.Equal(dst, block(r.Key, crashBS)) {
					t.Fatalf("run %d life %d: row %d serves wrong bytes", run, life, r.Slot)
				}
			}
			if inflight >= 0 {
				caught++
				switch k, ok := got[inflight]; {
				case ok && k != newKey && k != old:
					t.Fatalf("run %d life %d: in-flight row %d recovered as %s, neither the block being written nor the one before", run, life, inflight, k)
				case ok:
					state[inflight] = k
				default:
					state[inflight] = ""
				}
			}
			for s, want := range state {
				if got[s] != want {
					t.Fatalf("run %d life %d: row %d recovered %q, the log says %q", run, life, s, got[s], want)
				}
			}
			if r := st.Recovery(); r.Discarded != 0 || r.Stale != 0 {
				t.Fatalf("run %d life %d: recovery %+v", run, life, r)
			}
			_ = m.Close()
		}
	}
	t.Logf("6 runs of 3 kills: %d landed during a write", caught)
}
