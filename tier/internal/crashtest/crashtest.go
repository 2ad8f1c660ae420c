// Package crashtest holds what the crash tests of the persistent tiers
// share: a child process that stores blocks until it is killed, logging
// every slot write, and the parent's reading of that log. Only tests import
// it; it imports no testing, so every failure comes back as an error.
package crashtest

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/locus-go/locus/tier"
)

// Child stores block(key(i)) through m for i from seed*100000 on, one
// block at a time and waiting for each to complete, until the process is
// killed. An error is printed as a line "E <error>" and ends the process
// with status 2. m's storage logs its writes with Before and After.
func Child(m *tier.Manager, seed int, key func(int) tier.Key, block func(tier.Key) []byte) {
	for i := seed * 100000; ; i++ {
		k := key(i)
		if _, err := m.Store([]tier.Key{k}, [][]byte{block(k)}); err != nil {
			Exit(err)
		}
		for n := 0; n < 1; {
			done, _ := m.Drain(nil)
			n += len(done)
		}
	}
}

// Exit prints err as the child's error line and ends the process.
func Exit(err error) {
	fmt.Println("E", err)
	os.Exit(2)
}

// Before logs the start of a write of k into slot, on stdout (unbuffered:
// os.Stdout is a file).
func Before(slot int, k tier.Key) { fmt.Fprintf(os.Stdout, "B %d %x\n", slot, k.Hash) }

// After logs the end of a write of k into slot.
func After(slot int, k tier.Key) { fmt.Fprintf(os.Stdout, "D %d %x\n", slot, k.Hash) }

// Life is what the log of one child's life says beyond the slots' state.
type Life struct {
	Inflight int    // the slot being written when the kill came; -1: none
	Old, New string // the in-flight slot's key before the write, and the key being written
	Writes   int    // writes completed
}

// Run runs the test test of the binary exe in a child process with env
// added to its environment, kills it (SIGKILL on Unix) after delay, and
// reads its log: state, a key's hash in hex per slot ("" for an empty one),
// becomes what the completed writes left.
func Run(exe, test string, env []string, delay time.Duration, state []string) (Life, error) {
	cmd := exec.Command(exe, "-test.run=^"+test+"$", "-test.count=1")
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return Life{}, err
	}
	if err := cmd.Start(); err != nil {
		return Life{}, err
	}
	timer := time.AfterFunc(delay, func() { _ = cmd.Process.Kill() })
	defer func() {
		timer.Stop()
		_ = cmd.Wait()
	}()
	life := Life{Inflight: -1}
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "E ") {
			_ = cmd.Process.Kill()
			return life, fmt.Errorf("child: %s", line)
		}
		f := strings.Fields(line)
		if len(f) != 3 {
			continue
		}
		slot, _ := strconv.Atoi(f[1])
		switch f[0] {
		case "B":
			life.Inflight, life.Old, life.New = slot, state[slot], f[2]
		case "D":
			life.Writes++
			state[slot], life.Inflight = f[2], -1
		}
	}
	return life, nil
}
