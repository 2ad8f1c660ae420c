package host_test

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/locus-go/locus/pool"
	"github.com/locus-go/locus/tier"
	"github.com/locus-go/locus/tier/host"
)

func skipNoPeer(t testing.TB) {
	t.Helper()
	skipOffLinux(t)
	if runtime.GOARCH != "amd64" && runtime.GOARCH != "386" {
		t.Skip("peers need an x86 memory order")
	}
}

func attach(t testing.TB, path string) *host.Peer {
	t.Helper()
	p, err := host.Attach(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// storeKeys stores keys first..first+n-1 through m and waits for them.
func storeKeys(t testing.TB, m *tier.Manager, bs, first, n int) {
	t.Helper()
	var ks []tier.Key
	var srcs [][]byte
	for i := first; i < first+n; i++ {
		ks = append(ks, key(i))
		srcs = append(srcs, block(key(i), bs))
	}
	if _, err := m.Store(ks, srcs); err != nil {
		t.Fatal(err)
	}
	drain(t, m, 1)
}

// readAll reads every row of p and returns the keys it found, by slot,
// checking each block's bytes against its key.
func readAll(t testing.TB, p *host.Peer) map[int]tier.Key {
	t.Helper()
	got := map[int]tier.Key{}
	dst := make([]byte, p.BlockSize())
	for s := range p.Slots() {
		k, _, err := p.Read(s, dst)
		switch {
		case errors.Is(err, host.ErrNoBlock):
		case err != nil:
			t.Fatalf("slot %d: %v", s, err)
		case !bytes.Equal(dst, block(k, p.BlockSize())):
			t.Fatalf("slot %d: the bytes are not those of %v", s, k)
		default:
			got[s] = k
		}
	}
	return got
}

// TestPeerReads: a peer sees what the owner stored, row by row, while the
// owner has the file; empty rows hold no block; a Reset makes every row
// unreadable; the owner's close leaves the rows readable.
func TestPeerReads(t *testing.T) {
	skipNoPeer(t)
	const bs, rows = 4096 + 100, 16
	path := shmPath(t)
	st := newShared(t, path, bs, rows)
	m, err := tier.New(st, tier.WithWorkers(2))
	if err != nil {
		t.Fatal(err)
	}
	storeKeys(t, m, bs, 0, 10)
	p := attach(t, path)
	if p.BlockSize() != bs || p.Slots() != rows {
		t.Fatalf("peer sees %d rows of %d bytes", p.Slots(), p.BlockSize())
	}
	got := readAll(t, p)
	if len(got) != 10 {
		t.Fatalf("peer read %d blocks, want 10", len(got))
	}
	want := map[tier.Key]bool{}
	for i := range 10 {
		want[key(i)] = true
	}
	for s, k := range got {
		if !want[k] {
			t.Fatalf("slot %d holds %v, not a stored key", s, k)
		}
		delete(want, k)
	}
	// The slots a LoadPlan names are the rows the peer reads.
	plan, err := m.PrepareLoad([]tier.Key{key(3)})
	if err != nil {
		t.Fatal(err)
	}
	if got[plan.Slots[0]] != key(3) {
		t.Fatalf("plan's slot %d holds %v for the peer", plan.Slots[0], got[plan.Slots[0]])
	}
	if err := m.CompleteLoad(plan.Job); err != nil {
		t.Fatal(err)
	}

	if err := m.Close(); err != nil { // the owner goes: the rows stay
		t.Fatal(err)
	}
	if n := len(readAll(t, p)); n != 10 {
		t.Fatalf("after the owner closed: %d blocks", n)
	}
	st2 := newShared(t, path, bs, rows) // the next owner, beside the peer
	m2, err := tier.New(st2)
	if err != nil {
		t.Fatal(err)
	}
	defer m2.Close()
	if err := m2.Reset(); err != nil {
		t.Fatal(err)
	}
	if n := len(readAll(t, p)); n != 0 {
		t.Fatalf("after a Reset the peer still reads %d blocks", n)
	}
	storeKeys(t, m2, bs, 100, 3)
	if n := len(readAll(t, p)); n != 3 {
		t.Fatalf("after the Reset and 3 stores: %d blocks", n)
	}
}

// TestPeerChanged: a write or a Reset that lands during the peer's copy
// makes the Read fail with ErrChanged, whatever the new row holds; the
// next Read returns the new block.
func TestPeerChanged(t *testing.T) {
	skipNoPeer(t)
	const bs, rows = 8192, 4
	path := shmPath(t)
	st := newShared(t, path, bs, rows)
	if err := st.WriteSlot(1, key(1), 5, block(key(1), bs)); err != nil {
		t.Fatal(err)
	}
	p := attach(t, path)
	dst := make([]byte, bs)
	cases := []struct {
		name  string
		write func() error
		want  tier.Key // what the row holds after
	}{
		{"another block", func() error { return st.WriteSlot(1, key(2), 6, block(key(2), bs)) }, key(2)},
		{"the same key, a new write", func() error { return st.WriteSlot(1, key(2), 7, block(key(2), bs)) }, key(2)},
		{"a reset", func() error { return st.Reset(8) }, tier.Key{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p.SetAfterCopy(func() {
				if err := c.write(); err != nil {
					t.Error(err)
				}
			})
			if _, _, err := p.Read(1, dst); !errors.Is(err, host.ErrChanged) {
				t.Fatalf("Read during a rewrite: %v, want ErrChanged", err)
			}
			p.SetAfterCopy(nil)
			k, _, err := p.Read(1, dst)
			if c.want == (tier.Key{}) {
				if !errors.Is(err, host.ErrNoBlock) {
					t.Fatalf("after a reset: %v %v, want ErrNoBlock", k, err)
				}
				return
			}
			if err != nil || k != c.want || !bytes.Equal(dst, block(k, bs)) {
				t.Fatalf("after the rewrite: %v %v", k, err)
			}
		})
	}
}

// TestPeerRefused: files that hold no shared tier, and bad arguments, are
// errors; nothing panics.
func TestPeerRefused(t *testing.T) {
	skipNoPeer(t)
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		path := dir + "/" + name
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	if _, err := host.Attach(dir + "/missing"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing file: %v", err)
	}
	for name, b := range map[string][]byte{
		"empty":   nil,
		"short":   []byte("LOCUS"),
		"zeros":   make([]byte, 1<<16),
		"garbage": bytes.Repeat([]byte("not a tier "), 1000),
	} {
		if _, err := host.Attach(write(name, b)); !errors.Is(err, host.ErrNotShared) {
			t.Fatalf("%s file: %v, want ErrNotShared", name, err)
		}
	}
	// A valid superblock over a file too short for its rows.
	path := shmPath(t)
	_ = newShared(t, path, 4096, 8).Close()
	whole, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := host.Attach(write("truncated", whole[:len(whole)-1])); !errors.Is(err, host.ErrNotShared) {
		t.Fatalf("truncated file: %v, want ErrNotShared", err)
	}

	p, err := host.Attach(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		slot int
		dst  []byte
	}{{-1, make([]byte, 4096)}, {8, make([]byte, 4096)}, {0, make([]byte, 4095)}, {0, nil}} {
		if _, _, err := p.Read(c.slot, c.dst); !errors.Is(err, pool.ErrInvalidArgument) {
			t.Fatalf("Read(%d, %d bytes): %v, want ErrInvalidArgument", c.slot, len(c.dst), err)
		}
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := p.Read(0, make([]byte, 4096)); !errors.Is(err, pool.ErrClosed) {
		t.Fatalf("after Close: %v", err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	var nilPeer *host.Peer
	if _, _, err := nilPeer.Read(0, nil); !errors.Is(err, pool.ErrClosed) || nilPeer.Slots() != 0 || nilPeer.BlockSize() != 0 || nilPeer.Close() != nil {
		t.Fatalf("nil peer: %v", err)
	}
}

// A peer in one process reads while the owner, in another, stores blocks
// as fast as it can into a tier too small for them, so that every row is
// rewritten again and again under the reads: every block a Read returns
// has exactly its key's bytes.

const peerRows, peerBS = 8, 64 << 10

func TestPeerConcurrentChild(t *testing.T) {
	path := os.Getenv("LOCUS_HOST_PEER_FILE")
	if path == "" {
		t.Skip("run by TestPeerConcurrent")
	}
	st, err := host.New(peerBS, peerRows, host.WithSharedFile(path))
	if err != nil {
		fmt.Println("E", err)
		os.Exit(2)
	}
	m, err := tier.New(st, tier.WithWorkers(1))
	if err != nil {
		fmt.Println("E", err)
		os.Exit(2)
	}
	srcs := make([][]byte, 64)
	for i := range srcs {
		srcs[i] = block(key(i), peerBS)
	}
	fmt.Println("R") // ready: the superblock is written
	for i := 0; ; i++ {
		k := i % len(srcs)
		if _, err := m.Store([]tier.Key{key(k)}, [][]byte{srcs[k]}); err != nil {
			fmt.Println("E", err)
			os.Exit(2)
		}
		for n := 0; n < 1; {
			done, _ := m.Drain(nil)
			n += len(done)
		}
	}
}

func TestPeerConcurrent(t *testing.T) {
	skipNoPeer(t)
	exe := testBinary(t)
	path := shmPath(t)
	cmd := exec.Command(exe, "-test.run=^TestPeerConcurrentChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), "LOCUS_HOST_PEER_FILE="+path)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	sc := bufio.NewScanner(out)
	for sc.Scan() && !strings.HasPrefix(sc.Text(), "R") {
		if strings.HasPrefix(sc.Text(), "E ") {
			t.Fatalf("child: %s", sc.Text())
		}
	}
	go func() { // keep the child's pipe from filling
		for sc.Scan() {
		}
	}()
	p := attach(t, path)
	dst := make([]byte, peerBS)
	var ok, changed, none int
	gens := map[int]uint64{}
	for end := time.Now().Add(400 * time.Millisecond); time.Now().Before(end) || ok < 100; {
		slot := rand.IntN(peerRows)
		k, gen, err := p.Read(slot, dst)
		switch {
		case errors.Is(err, host.ErrChanged):
			changed++
		case errors.Is(err, host.ErrNoBlock):
			none++
		case err != nil:
			t.Fatal(err)
		default:
			ok++
			if !bytes.Equal(dst, block(k, peerBS)) {
				t.Fatalf("slot %d: a Read returned %v@%d with other bytes (%d good reads before)", slot, k, gen, ok)
			}
			if gen < gens[slot] {
				t.Fatalf("slot %d: generation %d after %d", slot, gen, gens[slot])
			}
			gens[slot] = gen
		}
	}
	t.Logf("%d whole reads, %d changed under the copy, %d rows between writes", ok, changed, none)
}

// FuzzAttach: Attach and Read over any file content never panic, and fail
// only with the documented errors.
func FuzzAttach(f *testing.F) {
	skipNoPeer(f)
	path := shmPath(f)
	_ = newShared(f, path, 512, 4).Close()
	valid, err := os.ReadFile(path)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(valid, 0, byte(0))
	f.Add(valid, 70, byte(1))
	f.Add([]byte("LOCUSHT1"), 0, byte(0))
	dir := f.TempDir()
	n := 0
	f.Fuzz(func(t *testing.T, file []byte, at int, flip byte) {
		if len(file) > 1<<20 {
			return
		}
		if len(file) > 0 {
			file = bytes.Clone(file)
			file[uint(at)%uint(len(file))] ^= flip
		}
		n++
		name := dir + "/f" + strconv.Itoa(n)
		if err := os.WriteFile(name, file, 0o600); err != nil {
			t.Fatal(err)
		}
		defer os.Remove(name)
		p, err := host.Attach(name)
		if err != nil {
			if !errors.Is(err, host.ErrNotShared) {
				t.Fatalf("Attach: %v", err)
			}
			return
		}
		defer p.Close()
		dst := make([]byte, p.BlockSize())
		for s := range min(p.Slots(), 64) {
			if _, _, err := p.Read(s, dst); err != nil && !errors.Is(err, host.ErrNoBlock) && !errors.Is(err, host.ErrChanged) {
				t.Fatalf("Read(%d): %v", s, err)
			}
		}
	})
}

// An engine that writes rows itself (a DMA into Slot(i) between
// PrepareStore and CompleteStore): while it writes, a peer finds no block
// in the row (not the evicted one), a restart does not recover the
// evicted block from it, and after CompleteStore the peer, the Manager's
// own Load and the next owner all see the new block.
func TestPeerDirectWrites(t *testing.T) {
	skipNoPeer(t)
	const bs = 8192
	path := shmPath(t)
	st := newShared(t, path, bs, 1)
	m, err := tier.New(st)
	if err != nil {
		t.Fatal(err)
	}
	k1, k2 := key(1), key(2)
	storeKeys(t, m, bs, 1, 1)
	p := attach(t, path)
	dst := make([]byte, bs)
	if k, _, err := p.Read(0, dst); err != nil || k != k1 {
		t.Fatalf("before: %v %v", k, err)
	}
	plan, err := m.PrepareStore([]tier.Key{k2}) // evicts k1 from the only row
	if err != nil || len(plan.Slots) != 1 || len(plan.Evicted) != 1 {
		t.Fatalf("PrepareStore: %+v %v", plan, err)
	}
	row := st.Slot(plan.Slots[0])
	copy(row[:bs/2], block(k2, bs)[:bs/2]) // the DMA, half way
	if k, _, err := p.Read(0, dst); !errors.Is(err, host.ErrNoBlock) {
		t.Fatalf("mid-write: the peer read %v, %v; want ErrNoBlock", k, err)
	}
	copy(row, block(k2, bs))
	if err := m.CompleteStore(plan.Job, true); err != nil {
		t.Fatal(err)
	}
	if k, _, err := p.Read(0, dst); err != nil || k != k2 || !bytes.Equal(dst, block(k2, bs)) {
		t.Fatalf("after: the peer read %v, %v", k, err)
	}
	got := make([]byte, bs)
	if _, err := m.Load([]tier.Key{k2}, [][]byte{got}); err != nil {
		t.Fatal(err)
	}
	drain(t, m, 1)
	if !bytes.Equal(got, block(k2, bs)) {
		t.Fatal("the Manager's Load of an engine-written block differs")
	}

	// A write cut short (PrepareStore, half a DMA, the owner gone) leaves
	// nothing to recover; a completed one is recovered.
	plan, err = m.PrepareStore([]tier.Key{key(3)})
	if err != nil {
		t.Fatal(err)
	}
	copy(st.Slot(plan.Slots[0])[:100], "torn")
	_ = m.Close()
	next := newShared(t, path, bs, 1)
	if r := next.Recovery(); r != (host.Recovery{Empty: 1}) {
		t.Fatalf("after a write cut short: %+v, want the row empty", r)
	}
	_ = next.Close()
}

// A valid superblock whose geometry the file cannot hold (rows whose
// headers alone overflow a 32-bit int, rows past the end, a block size
// that overflows with the rows) is refused with ErrNotShared on every
// architecture, whatever the file's size.
func TestPeerHostileGeometry(t *testing.T) {
	skipNoPeer(t)
	super := func(bs, rows uint32) []byte {
		b := make([]byte, 64)
		copy(b, "LOCUSHT1")
		binary.LittleEndian.PutUint32(b[8:], bs)
		binary.LittleEndian.PutUint32(b[12:], rows)
		binary.LittleEndian.PutUint32(b[24:], crc32.Checksum(b[:24], crc32.MakeTable(crc32.Castagnoli)))
		return b
	}
	dir := t.TempDir()
	for _, c := range []struct {
		name     string
		bs, rows uint32
		size     int64
	}{
		{"headers wrap 32 bits", 1, 1 << 29, int64(os.Getpagesize()) + 1<<29},
		{"rows past the end", 4096, 1000, 1 << 20},
		{"block size times rows wraps", 1 << 31, 1 << 20, 1 << 24},
		{"headers end the file", 4096, 1, 100},
	} {
		path := filepath.Join(dir, strconv.Itoa(int(c.rows)))
		if err := os.WriteFile(path, super(c.bs, c.rows), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(path, c.size); err != nil {
			t.Fatal(err)
		}
		if p, err := host.Attach(path); !errors.Is(err, host.ErrNotShared) {
			if err == nil {
				_ = p.Close()
			}
			t.Errorf("%s: Attach = %v, want ErrNotShared", c.name, err)
		}
	}
}
