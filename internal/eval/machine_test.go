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
