package snapshot

import (
	"sync"
	"testing"
	"time"
)

func TestZeroCell(t *testing.T) {
	var c Cell[int]
	if c.Wanted() {
		t.Fatal("a zero Cell is wanted")
	}
	if v := c.Read(time.Hour, 0); v != 0 {
		t.Fatalf("zero Cell reads %d", v)
	}
}

func TestFreshValueWithoutWaiting(t *testing.T) {
	var c Cell[int]
	c.Publish(7)
	start := time.Now()
	if v := c.Read(time.Hour, time.Hour); v != 7 {
		t.Fatalf("Read = %d, want 7", v)
	}
	if c.Wanted() {
		t.Fatal("a fresh read asked for a publication")
	}
	if time.Since(start) > 10*time.Second {
		t.Fatal("a fresh read waited")
	}
}

func TestStaleReadAsksAndGetsTheNextValue(t *testing.T) {
	var c Cell[int]
	c.Publish(1)
	got := make(chan int)
	go func() { got <- c.Read(0, time.Hour) }()
	for !c.Wanted() {
		time.Sleep(time.Millisecond)
	}
	c.Publish(2)
	if v := <-got; v != 2 {
		t.Fatalf("Read = %d, want the value published after it asked", v)
	}
	if c.Wanted() {
		t.Fatal("still wanted after Publish")
	}
}

func TestReadGivesUpAfterWait(t *testing.T) {
	var c Cell[int]
	c.Publish(3)
	if v := c.Read(0, time.Millisecond); v != 3 {
		t.Fatalf("Read = %d, want the last value", v)
	}
	if !c.Wanted() {
		t.Fatal("the unanswered request was withdrawn")
	}
}

func TestSealedNeverWaits(t *testing.T) {
	var c Cell[int]
	c.Seal(9)
	if v := c.Read(0, time.Hour); v != 9 {
		t.Fatalf("Read = %d, want 9", v)
	}
}

// Readers and an owner that publishes only when asked: every reader gets a
// value, no reader waits for its whole deadline while the owner steps, and
// values never go back. Run with -race.
func TestOwnerAndReaders(t *testing.T) {
	var c Cell[int]
	stop := make(chan struct{})
	var owner sync.WaitGroup
	owner.Go(func() {
		for step := 1; ; step++ {
			select {
			case <-stop:
				return
			default:
			}
			if c.Wanted() {
				c.Publish(step)
			}
			time.Sleep(50 * time.Microsecond)
		}
	})
	var readers sync.WaitGroup
	for range 4 {
		readers.Go(func() {
			last := 0
			for range 200 {
				v := c.Read(0, time.Minute)
				if v < last || v == 0 {
					t.Errorf("read %d after %d", v, last)
					return
				}
				last = v
			}
		})
	}
	readers.Wait()
	close(stop)
	owner.Wait()
}

func TestInitIsNotFresh(t *testing.T) {
	var c Cell[int]
	c.Init(5)
	if v := c.Read(time.Hour, time.Millisecond); v != 5 {
		t.Fatalf("Read = %d, want 5", v)
	}
	if !c.Wanted() {
		t.Fatal("a read after Init did not ask the owner")
	}
}
