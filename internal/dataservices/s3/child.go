package s3

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/versity/versitygw/backend/meta"
	"github.com/versity/versitygw/backend/posix"
	"github.com/versity/versitygw/embedgw"
)

// childEnv marks the re-executed binary as the gateway child.
const childEnv = "KUBE_EMBEDDED_S3_CHILD"

// childConfig is what the parent sends the child on stdin, as one JSON line.
type childConfig struct {
	Dir       string `json:"dir"`
	Addr      string `json:"addr"`
	Region    string `json:"region"`
	AccessKey string `json:"accessKey"`
	SecretKey string `json:"secretKey"`
}

func init() {
	if os.Getenv(childEnv) != "1" {
		return
	}
	if err := runChild(os.Stdin); err != nil {
		fmt.Fprintln(os.Stderr, "embedded s3:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// runChild runs the gateway until stdin closes or SIGTERM/SIGINT arrives.
func runChild(stdin io.Reader) error {
	r := bufio.NewReader(stdin)
	line, err := r.ReadBytes('\n')
	if err != nil {
		return fmt.Errorf("read configuration: %w", err)
	}
	var c childConfig
	if err := json.Unmarshal(line, &c); err != nil {
		return fmt.Errorf("configuration: %w", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	ctx, cancel := context.WithCancel(ctx)
	go func() { _, _ = io.Copy(io.Discard, r); cancel() }()

	root, iam, versions := filepath.Join(c.Dir, "data"), filepath.Join(c.Dir, "iam"), filepath.Join(c.Dir, "versions")
	for _, d := range []string{root, iam, versions} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return err
		}
	}
	var ms meta.MetadataStorer = meta.XattrMeta{}
	if err := (meta.XattrMeta{}).Test(root); err != nil {
		sc, err := meta.NewSideCar(filepath.Join(c.Dir, "meta"))
		if err != nil {
			return fmt.Errorf("metadata: no xattrs and no sidecar: %w", err)
		}
		ms = sc
	}
	be, err := posix.New(root, ms, posix.PosixOpts{VersioningDir: versions})
	if err != nil {
		return fmt.Errorf("posix backend: %w", err)
	}
	defer be.Shutdown()
	return embedgw.RunVersityGW(ctx, be, &embedgw.Config{
		RootUserAccess: c.AccessKey, RootUserSecret: c.SecretKey, Region: c.Region,
		Ports: []string{c.Addr}, MaxConnections: 4096, MaxRequests: 1024, MultipartMaxParts: 10000,
		IAMDir: iam, Quiet: true, KeepAlive: true, HealthPath: healthPath,
		// No IAM cache: with embedgw's zero prune interval its cleanup loop spins on
		// time.After(0) (most of a core, measured with perf in test/dataservices), and
		// without a cache a revoked key is refused at once.
		IAMCacheDisable: true,
	})
}

// healthPath answers 200 without authentication.
const healthPath = "/kube-healthz"
