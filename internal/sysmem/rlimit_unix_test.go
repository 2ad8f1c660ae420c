//go:build unix

package sysmem

import (
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
)

// Under an address-space limit (prlimit --as), a size within physical
// memory but beyond the limit is refused, naming RLIMIT_AS, instead of
// passing the check and killing the process in the allocation. The limit
// is set in a child process, so this test binary keeps its own.
func TestFitsHonoursRlimitAS(t *testing.T) {
	if os.Getenv("SYSMEM_CHILD") == "1" {
		lim := syscall.Rlimit{Cur: 8 << 30, Max: 8 << 30}
		if err := syscall.Setrlimit(syscall.RLIMIT_AS, &lim); err != nil {
			t.Skipf("setrlimit: %v", err)
		}
		err := Fits(16 << 30)
		if err == nil || !strings.Contains(err.Error(), "RLIMIT_AS") {
			t.Fatalf("16 GiB under an 8 GiB RLIMIT_AS: %v", err)
		}
		if err := Fits(64 << 20); err != nil {
			t.Fatalf("64 MiB under an 8 GiB RLIMIT_AS: %v", err)
		}
		return
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run", "^TestFitsHonoursRlimitAS$", "-test.v")
	cmd.Env = append(os.Environ(), "SYSMEM_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "--- PASS") {
		t.Fatalf("the child did not pass:\n%s", out)
	}
}

func TestParseLimit(t *testing.T) {
	for in, want := range map[string]uint64{"max\n": 0, "1073741824\n": 1 << 30, "": 0, "-1": 0} {
		if got := parseLimit(in); got != want {
			t.Errorf("parseLimit(%q) = %d, want %d", in, got, want)
		}
	}
	if left(10, 3) != 7 || left(3, 10) != 0 {
		t.Error("left")
	}
}
