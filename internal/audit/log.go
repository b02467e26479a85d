package audit

import (
	"context"
	"fmt"
	"io"
	"os"
	"sync"

	"gopkg.in/natefinch/lumberjack.v2"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
)

// Log writes audit events as JSON lines. It is safe for concurrent use.
type Log struct {
	// Policy decides each request's level.
	Policy *Policy
	// Annotate, when set, may add annotations to every event before it is written. It is the
	// hook for the lifecycle engine's operator and phase annotations.
	Annotate func(ctx context.Context, ev *auditv1.Event)

	mu  sync.Mutex
	out io.Writer
	c   io.Closer
}

// LogOptions say where events go.
type LogOptions struct {
	// Path is the log file; "-" is standard output.
	Path string
	// MaxSizeMB rotates the file when it grows beyond this many megabytes (default 100).
	MaxSizeMB int
	// MaxBackups is how many rotated files are kept (0 keeps all).
	MaxBackups int
	// MaxAgeDays removes rotated files older than this (0 keeps them).
	MaxAgeDays int
}

// NewLog opens the log described by o with policy p.
func NewLog(p *Policy, o LogOptions) (*Log, error) {
	l := &Log{Policy: p}
	switch o.Path {
	case "":
		return nil, fmt.Errorf("--audit-log-path is required with --audit-policy-file")
	case "-":
		l.out = os.Stdout
	default:
		if o.MaxSizeMB == 0 {
			o.MaxSizeMB = 100
		}
		lj := &lumberjack.Logger{Filename: o.Path, MaxSize: o.MaxSizeMB, MaxBackups: o.MaxBackups, MaxAge: o.MaxAgeDays}
		l.out, l.c = lj, lj
	}
	return l, nil
}

// NewWriterLog is a log that writes to w (tests, benchmarks).
func NewWriterLog(p *Policy, w io.Writer) *Log { return &Log{Policy: p, out: w} }

// Write writes one event as a JSON line.
func (l *Log) Write(ctx context.Context, ev *auditv1.Event) error {
	if l.Annotate != nil {
		l.Annotate(ctx, ev)
	}
	redactSecrets(ev)
	data, err := appendEvent(make([]byte, 0, 1024), ev)
	if err != nil {
		return err
	}
	data = append(data, '\n')
	l.mu.Lock()
	defer l.mu.Unlock()
	_, err = l.out.Write(data)
	return err
}

// Close closes the log file.
func (l *Log) Close() error {
	if l == nil || l.c == nil {
		return nil
	}
	return l.c.Close()
}
