//go:build linux

// Package listeners checks what a `kube server` process exposes, the way an operator would
// with `ss -ltnp`: with its default embedded etcd it listens on its HTTPS port and on no other
// TCP port, since etcd answers every request without authentication and would hand out every
// object, secrets included, past the API server. The embedded member's only client socket is
// a unix socket that only the server's user can open.
package listeners

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"kubeos.dev/kube/internal/localuser"
	"kubeos.dev/kube/internal/server/servertest/kubeproc"
)

func TestServerListensOnlyOnItsPort(t *testing.T) {
	dir := t.TempDir()
	bin := kubeproc.BuildKube(t, dir)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()

	data := filepath.Join(dir, "data")
	var out kubeproc.Buffer
	cmd := exec.Command(bin, "server", "--data-dir", data, "--secure-port", strconv.Itoa(port))
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGKILL)
		_ = cmd.Wait()
	}()
	deadline := time.Now().Add(60 * time.Second)
	for !strings.Contains(out.String(), "Kube is ready") {
		if time.Now().After(deadline) {
			t.Fatalf("kube server not ready within 60 s:\n%s", out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}

	// The store works: a Secret written through the API reads back.
	cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(data, "kubeconfig"))
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "default"}, StringData: map[string]string{"password": "hunter2"}}
	if _, err := cs.CoreV1().Secrets("default").Create(ctx, sec, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if got, err := cs.CoreV1().Secrets("default").Get(ctx, "s", metav1.GetOptions{}); err != nil || string(got.Data["password"]) != "hunter2" {
		t.Fatalf("secret read back: %v %v", got, err)
	}

	ports, err := listeningTCPPorts(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	// Besides its secure port the server listens only for its embedded NATS JetStream (on
	// by default, registered as the nats-embedded server entry), on loopback, and that port
	// refuses a client without the admin's credentials.
	entry, err := cs.CoreV1().Secrets("kube-system").Get(ctx, "nats-embedded", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	natsURL, err := url.Parse(string(entry.Data["url"]))
	if err != nil {
		t.Fatal(err)
	}
	natsPort, _ := strconv.Atoi(natsURL.Port())
	want := []int{port, natsPort}
	slices.Sort(want)
	slices.Sort(ports)
	if !slices.Equal(ports, want) || natsURL.Hostname() != "127.0.0.1" {
		t.Errorf("kube server listens on TCP ports %v, want only its secure port %d and its embedded NATS %s", ports, port, natsURL.Host)
	}
	conn, err := net.DialTimeout("tcp", natsURL.Host, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	_, _ = conn.Write([]byte("CONNECT {\"verbose\":false}\r\nPING\r\n"))
	reply, _ := io.ReadAll(conn)
	conn.Close()
	if !strings.Contains(string(reply), "Authorization Violation") {
		t.Errorf("embedded NATS answered a client without credentials: %q", reply)
	}

	etcdDir := filepath.Join(data, "etcd")
	sock := filepath.Join(etcdDir, "client.sock")
	localuser.AssertMode(t, etcdDir, os.ModeDir|0o700)
	localuser.AssertMode(t, sock, os.ModeSocket|0o600)
	if tried, err := localuser.DialAsNobody(sock); !tried {
		t.Log("not root: did not try to connect as another user")
	} else if !errors.Is(err, syscall.EACCES) {
		t.Errorf("another user connecting to %s: %v, want permission denied", sock, err)
	}
}

// listeningTCPPorts are the ports of the TCP sockets in LISTEN state that process pid holds,
// from /proc as ss reads them.
func listeningTCPPorts(pid int) ([]int, error) {
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return nil, err
	}
	inodes := map[string]bool{}
	for _, fd := range fds {
		target, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name()))
		if err == nil && strings.HasPrefix(target, "socket:[") {
			inodes[strings.TrimSuffix(strings.TrimPrefix(target, "socket:["), "]")] = true
		}
	}
	var ports []int
	for _, table := range []string{"tcp", "tcp6"} {
		f, err := os.Open(fmt.Sprintf("/proc/%d/net/%s", pid, table))
		if err != nil {
			return nil, err
		}
		sc := bufio.NewScanner(f)
		sc.Scan() // header
		for sc.Scan() {
			// sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode
			fields := strings.Fields(sc.Text())
			if len(fields) < 10 || fields[3] != "0A" || !inodes[fields[9]] {
				continue
			}
			_, hexPort, _ := strings.Cut(fields[1], ":")
			p, err := strconv.ParseUint(hexPort, 16, 16)
			if err != nil {
				f.Close()
				return nil, err
			}
			ports = append(ports, int(p))
		}
		f.Close()
		if err := sc.Err(); err != nil {
			return nil, err
		}
	}
	return ports, nil
}
