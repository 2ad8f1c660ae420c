package events

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/locus-go/locus/pool"
)

// Every hash goes out in the 8-byte form, small ones included, and every
// decoder reads it back as the same value.
func TestAppendUint64Fixed(t *testing.T) {
	for _, c := range []struct {
		name string
		v    uint64
	}{
		{"zero", 0},
		{"fixint", 1},
		{"uint8", 200},
		{"uint16", 1 << 15},
		{"uint32", 1<<32 - 1},
		{"uint64", 1 << 32},
		{"max", ^uint64(0)},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := appendUint64Fixed([]byte{0x91}, c.v)
			require.Len(t, b, 10)
			require.Equal(t, byte(0xcf), b[1])
			var got []uint64
			require.NoError(t, msgpack.Unmarshal(b, &got))
			require.Equal(t, []uint64{c.v}, got)
		})
	}
}

func FuzzAppendUint64Fixed(f *testing.F) {
	for _, v := range []uint64{0, 1, 127, 128, 1<<32 - 1, 1 << 63} {
		f.Add(v)
	}
	f.Fuzz(func(t *testing.T, v uint64) {
		b := appendUint64Fixed(nil, v)
		if len(b) != 9 || b[0] != 0xcf {
			t.Fatalf("% x", b)
		}
		var got uint64
		if err := msgpack.Unmarshal(b, &got); err != nil || got != v {
			t.Fatalf("decoded %d, %v; want %d", got, err, v)
		}
	})
}

func TestParseReplayRequest(t *testing.T) {
	seq := binary.BigEndian.AppendUint64(nil, 42)
	for _, c := range []struct {
		name   string
		frames [][]byte
		start  uint64
		ok     bool
	}{
		{"valid", [][]byte{{}, seq}, 42, true},
		{"nil delimiter", [][]byte{nil, seq}, 42, true},
		{"no frames", nil, 0, false},
		{"no delimiter", [][]byte{seq}, 0, false},
		{"delimiter not empty", [][]byte{{0}, seq}, 0, false},
		{"short", [][]byte{{}, seq[:7]}, 0, false},
		{"long", [][]byte{{}, append(seq, 0)}, 0, false},
		{"extra frame", [][]byte{{}, seq, {}}, 0, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			start, ok := parseReplayRequest(c.frames)
			require.Equal(t, c.ok, ok)
			require.Equal(t, c.start, start)
		})
	}
}

func FuzzParseReplayRequest(f *testing.F) {
	f.Add([]byte{}, binary.BigEndian.AppendUint64(nil, 7), false)
	f.Add([]byte{1}, []byte{1, 2}, true)
	f.Fuzz(func(t *testing.T, a, b []byte, third bool) {
		frames := [][]byte{a, b}
		if third {
			frames = append(frames, nil)
		}
		start, ok := parseReplayRequest(frames)
		want := len(a) == 0 && len(b) == 8 && !third
		if ok != want {
			t.Fatalf("ok = %v for %x %x %v", ok, a, b, third)
		}
		if ok && !bytes.Equal(binary.BigEndian.AppendUint64(nil, start), b) {
			t.Fatalf("start %d from %x", start, b)
		}
	})
}

func TestParseEndpoint(t *testing.T) {
	for _, c := range []struct {
		in, network, address string
	}{
		{"tcp://*:5557", "tcp", ":5557"},
		{"tcp://127.0.0.1:0", "tcp", "127.0.0.1:0"},
		{"tcp://[::1]:5557", "tcp", "[::1]:5557"},
		{"ipc:///tmp/kv.sock", "unix", "/tmp/kv.sock"},
		{"tcp://127.0.0.1", "", ""},
		{"tcp://:", "", ""},
		{"inproc://x", "", ""},
		{"ipc://", "", ""},
		{"5557", "", ""},
	} {
		t.Run(c.in, func(t *testing.T) {
			network, address, err := parseEndpoint(c.in)
			if c.network == "" {
				require.ErrorIs(t, err, pool.ErrInvalidConfig)
				return
			}
			require.NoError(t, err)
			require.Equal(t, c.network, network)
			require.Equal(t, c.address, address)
		})
	}
}

func FuzzParseEndpoint(f *testing.F) {
	for _, s := range []string{"tcp://*:5557", "ipc:///x", "tcp://[::1]:1", "inproc://a", "", "tcp://"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		network, address, err := parseEndpoint(s)
		if err != nil {
			if !errors.Is(err, pool.ErrInvalidConfig) {
				t.Fatalf("%q: %v does not wrap ErrInvalidConfig", s, err)
			}
			return
		}
		if network != "tcp" && network != "unix" || address == "" {
			t.Fatalf("%q: %q %q", s, network, address)
		}
	})
}
