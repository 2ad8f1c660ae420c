package owner

import (
	"errors"
	"runtime"
	"testing"
)

type thing struct{ _ [16]byte }

func TestClaim(t *testing.T) {
	var r Registry
	a, b := new(thing), new(thing)
	if err := Claim(&r, 1, a); err != nil {
		t.Fatal(err)
	}
	if err := Claim(&r, 1, a); err != nil {
		t.Fatalf("claiming again: %v", err)
	}
	if err := Claim(&r, 1, b); !errors.Is(err, ErrOwned) {
		t.Fatalf("a second owner: %v", err)
	}
	Release(&r, 1, b) // not b's: stays
	if err := Claim(&r, 1, b); !errors.Is(err, ErrOwned) {
		t.Fatalf("after another owner's release: %v", err)
	}
	Release(&r, 1, a)
	if err := Claim(&r, 1, b); err != nil {
		t.Fatalf("after the owner's release: %v", err)
	}
	runtime.KeepAlive(a)
	runtime.KeepAlive(b)
}

// An owner dropped without releasing holds nothing once collected.
func TestCollectedOwner(t *testing.T) {
	var r Registry
	func() {
		if err := Claim(&r, 7, new(thing)); err != nil {
			t.Fatal(err)
		}
	}()
	for range 10 {
		runtime.GC()
		if Claim(&r, 7, new(thing)) == nil {
			return
		}
	}
	t.Fatal("a collected owner still holds its resource")
}
