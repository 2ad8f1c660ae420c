package eval

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
)

func TestRevisionOf(t *testing.T) {
	stamp := []debug.BuildSetting{{Key: "vcs.revision", Value: "abc123"}, {Key: "vcs.modified", Value: "true"}}
	for _, tc := range []struct {
		name string
		bi   *debug.BuildInfo
		want Revision
	}{
		{"no build info", nil, Revision{modulePath, "unknown", false}},
		{"stamped", &debug.BuildInfo{Main: debug.Module{Path: modulePath}, Settings: stamp}, Revision{modulePath, "abc123", true}},
		{"release", &debug.BuildInfo{Main: debug.Module{Path: modulePath, Version: "v1.2.3"}}, Revision{modulePath, "v1.2.3", false}},
		{"devel", &debug.BuildInfo{Main: debug.Module{Path: modulePath, Version: "(devel)"}}, Revision{modulePath, "unknown", false}},
		// Another main module's stamp is about another repository.
		{"another main module", &debug.BuildInfo{Main: debug.Module{Path: "example.com/other"}, Settings: stamp},
			Revision{modulePath, "unknown", false}},
		{"a dependency", &debug.BuildInfo{Main: debug.Module{Path: "example.com/other"}, Settings: stamp,
			Deps: []*debug.Module{{Path: modulePath, Version: "v0.4.0"}}}, Revision{modulePath, "v0.4.0", false}},
		{"a replaced dependency", &debug.BuildInfo{Main: debug.Module{Path: "example.com/other"},
			Deps: []*debug.Module{{Path: modulePath, Version: "v0.4.0", Replace: &debug.Module{Path: "/src/locus"}}}},
			Revision{modulePath, "unknown", false}},
	} {
		if got := revisionOf(tc.bi, ""); got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

// gitRepo makes a repository with one commit in dir and returns its HEAD.
func gitRepo(t *testing.T, dir string) string {
	t.Helper()
	git := func(args ...string) string {
		cmd := exec.Command("git", append([]string{"-C", dir, "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"}, args...)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	git("init", "-q")
	if err := os.WriteFile(filepath.Join(dir, "f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	git("add", "f")
	git("commit", "-q", "-m", "x")
	return git("rev-parse", "HEAD")
}

// Git is asked about this module's own source directory only: never about
// the working directory, nor about a repository the module was copied into.
func TestRevisionNotFromAnotherRepository(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	other := t.TempDir()
	head := gitRepo(t, other)
	if rev := revisionOf(nil, other); rev.VCS != head {
		t.Fatalf("the module's own repository: %+v, want HEAD %s", rev, head)
	}
	copied := filepath.Join(other, "vendor", "locus")
	if err := os.MkdirAll(copied, 0o755); err != nil {
		t.Fatal(err)
	}
	if rev := revisionOf(nil, copied); rev.VCS != "unknown" {
		t.Errorf("a module copied into another repository took its revision: %+v", rev)
	}
	here := ThisRevision()
	t.Chdir(other)
	if there := ThisRevision(); there != here || there.VCS == head {
		t.Errorf("ThisRevision in another repository's directory: %+v, here %+v (that repository: %s)", there, here, head)
	}
}

// The CPU identity tells apart hosts that share a model name.
func TestParseCPUInfo(t *testing.T) {
	cpuinfo := func(vendor, family, model, flags string, cores ...string) string {
		var b strings.Builder
		for _, c := range cores {
			b.WriteString("processor\t: " + c + "\nvendor_id\t: " + vendor + "\ncpu family\t: " + family +
				"\nmodel\t\t: " + model + "\nmodel name\t: AMD EPYC\nstepping\t: 1\nphysical id\t: 0\ncore id\t\t: " + c +
				"\nflags\t\t: " + flags + "\n\n")
		}
		return b.String()
	}
	for _, tc := range []struct {
		name, text string
		want       CPU
		cores      int
		hyper      string
	}{
		{"zen4", cpuinfo("AuthenticAMD", "25", "17", "fpu hypervisor", "0", "1"), CPU{Vendor: "AuthenticAMD", Family: 25, Model: 17, Stepping: 1, Microarch: "Zen 4"}, 2, "yes"},
		{"zen3", cpuinfo("AuthenticAMD", "25", "1", "fpu", "0", "1", "1"), CPU{Vendor: "AuthenticAMD", Family: 25, Model: 1, Stepping: 1, Microarch: "Zen 3"}, 2, ""},
		{"spr", cpuinfo("GenuineIntel", "6", "143", "avx512f amx_tile", "0"), CPU{Vendor: "GenuineIntel", Family: 6, Model: 143, Stepping: 1, Microarch: "Sapphire Rapids"}, 1, ""},
		{"masked", cpuinfo("GenuineIntel", "6", "167", "avx512f amx_tile", "0"), CPU{Vendor: "GenuineIntel", Family: 6, Model: 167, Stepping: 1, Microarch: "Sapphire Rapids or later, by its flags"}, 1, ""},
		{"unknown", cpuinfo("Other", "1", "2", "", "0"), CPU{Vendor: "Other", Family: 1, Model: 2, Stepping: 1}, 1, ""},
	} {
		var m Machine
		parseCPUInfo(&m, tc.text)
		if m.CPU != tc.want || m.Cores != tc.cores || m.Hypervisor != tc.hyper || m.CPUModel != "AMD EPYC" {
			t.Errorf("%s: %+v, %d cores, hypervisor %q; want %+v, %d, %q", tc.name, m.CPU, m.Cores, m.Hypervisor, tc.want, tc.cores, tc.hyper)
		}
	}
	a := Machine{CPUModel: "AMD EPYC", NumCPU: 2, GOMAXPROCS: 2, CPU: CPU{Vendor: "AuthenticAMD", Family: 25, Model: 17}}
	b := a
	b.CPU.Model = 1
	if !a.SameHost(a) || a.SameHost(b) {
		t.Error("SameHost does not tell Zen 4 from Zen 3")
	}
}
