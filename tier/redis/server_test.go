package redis_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// A real redis-server on a loopback port, started and stopped by a test.
// Outside CI a test that needs one skips when redis-server is not on PATH;
// in CI (CI set) it fails instead.
type server struct {
	t    testing.TB
	bin  string
	dir  string
	port int
	args []string
	cmd  *exec.Cmd
	done chan struct{}
}

func needBinary(t testing.TB, name string) string {
	t.Helper()
	bin, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s is not on PATH, and CI must run this test (apt-get install redis-server)", name)
		}
		t.Skipf("%s is not on PATH (apt-get install redis-server); CI runs this test", name)
	}
	return bin
}

func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// startServer starts redis-server with no persistence on a free loopback
// port, plus args, and stops it (SIGKILL) when the test ends.
func startServer(t testing.TB, args ...string) *server {
	t.Helper()
	s := &server{t: t, bin: needBinary(t, "redis-server"), dir: t.TempDir(), port: freePort(t), args: args}
	s.start()
	t.Cleanup(s.kill)
	return s
}

func (s *server) addr() string { return "127.0.0.1:" + strconv.Itoa(s.port) }

func (s *server) start() {
	s.t.Helper()
	args := append([]string{
		"--port", strconv.Itoa(s.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--protected-mode", "no", "--dir", s.dir, "--loglevel", "warning",
	}, s.args...)
	s.cmd = exec.Command(s.bin, args...)
	s.cmd.Stdout, s.cmd.Stderr = nil, nil
	if err := s.cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	s.done = make(chan struct{})
	cmd, done := s.cmd, s.done
	go func() { _ = cmd.Wait(); close(done) }()
	c := goredis.NewClient(&goredis.Options{Addr: s.addr(), MaxRetries: -1})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for c.Ping(context.Background()).Err() != nil {
		if time.Now().After(deadline) {
			s.t.Fatalf("redis-server on %s did not answer", s.addr())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// stop freezes the server (SIGSTOP): connections stay open, nothing answers.
func (s *server) stop() { _ = pause(s.cmd.Process) }

// cont thaws it.
func (s *server) cont() { _ = resume(s.cmd.Process) }

// kill kills the server and waits for it.
func (s *server) kill() {
	if s.cmd == nil {
		return
	}
	_ = resume(s.cmd.Process)
	_ = s.cmd.Process.Kill()
	<-s.done
	s.cmd = nil
}

// restart starts a fresh, empty server on the same port.
func (s *server) restart() {
	s.kill()
	s.start()
}

// startCluster starts three masters with cluster mode on and joins them
// into one cluster with redis-cli (every slot covered, no replicas).
func startCluster(t testing.TB) []string {
	t.Helper()
	cli := needBinary(t, "redis-cli")
	var addrs []string
	for i := range 3 {
		s := startServer(t, "--cluster-enabled", "yes", "--cluster-config-file", fmt.Sprintf("nodes-%d.conf", i),
			"--cluster-node-timeout", "2000")
		addrs = append(addrs, s.addr())
	}
	out, err := exec.Command(cli, append(append([]string{"--cluster", "create"}, addrs...),
		"--cluster-replicas", "0", "--cluster-yes")...).CombinedOutput()
	if err != nil {
		t.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	// Every node must see the cluster ok, and a client must reach every
	// slot, before the cluster serves a test.
	deadline := time.Now().Add(20 * time.Second)
	for _, a := range addrs {
		c := goredis.NewClient(&goredis.Options{Addr: a})
		for {
			info, err := c.ClusterInfo(context.Background()).Result()
			if err == nil && strings.Contains(info, "cluster_state:ok") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("node %s never saw the cluster ok: %v %s", a, err, info)
			}
			time.Sleep(50 * time.Millisecond)
		}
		c.Close()
	}
	cc := goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: addrs})
	defer cc.Close()
	for i := 0; i < 64; {
		if err := cc.Set(context.Background(), "probe:"+strconv.Itoa(i), "x", 0).Err(); err != nil {
			if time.Now().After(deadline) {
				t.Fatalf("the cluster does not serve every slot: %v", err)
			}
			time.Sleep(50 * time.Millisecond)
			continue
		}
		i++
	}
	return addrs
}

var namespaces atomic.Uint64

// namespace returns a namespace no other tier of this test binary uses.
func namespace(t testing.TB) string {
	return fmt.Sprintf("locus-test:%s:%d", filepath.Base(t.Name()), namespaces.Add(1))
}
