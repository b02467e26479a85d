package backup

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"strings"
)

// ToolError is a failed tool run with its stderr (trimmed to its last 4 KiB).
type ToolError struct {
	Tool   string
	Err    error
	Stderr string
}

func (e *ToolError) Error() string {
	if e.Stderr == "" {
		return fmt.Sprintf("%s: %v", e.Tool, e.Err)
	}
	return fmt.Sprintf("%s: %v: %s", e.Tool, e.Err, e.Stderr)
}

func (e *ToolError) Unwrap() error { return e.Err }

// pgEnv turns a postgres:// admin URL into libpq environment variables for database db, so
// that the password is not on a command line.
func pgEnv(rawURL, db string) ([]string, error) {
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return nil, fmt.Errorf("not a postgres URL")
	}
	env := []string{"PGHOST=" + u.Hostname(), "PGDATABASE=" + db, "PGCONNECT_TIMEOUT=10"}
	if p := u.Port(); p != "" {
		env = append(env, "PGPORT="+p)
	}
	if u.User != nil {
		env = append(env, "PGUSER="+u.User.Username())
		if pw, ok := u.User.Password(); ok {
			env = append(env, "PGPASSWORD="+pw)
		}
	}
	if h := u.Query().Get("host"); h != "" { // a socket directory
		env = append(env, "PGHOST="+h)
	}
	if m := u.Query().Get("sslmode"); m != "" {
		env = append(env, "PGSSLMODE="+m)
	}
	return env, nil
}

// tail is a Writer that keeps the last n bytes.
type tail struct {
	n int
	b []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.b = append(t.b, p...)
	if len(t.b) > t.n {
		t.b = t.b[len(t.b)-t.n:]
	}
	return len(p), nil
}

func (t *tail) String() string { return strings.TrimSpace(string(t.b)) }

func run(ctx context.Context, env []string, stdin io.Reader, stdout io.Writer, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdin, cmd.Stdout = stdin, stdout
	stderr := &tail{n: 4096}
	cmd.Stderr = stderr
	if err := cmd.Run(); err != nil {
		return &ToolError{Tool: name, Err: err, Stderr: stderr.String()}
	}
	return nil
}

// DumpPostgres writes pg_dump's custom-format archive of database db to w.
func DumpPostgres(ctx context.Context, adminURL, db string, w io.Writer) error {
	env, err := pgEnv(adminURL, db)
	if err != nil {
		return err
	}
	return run(ctx, env, nil, w, "pg_dump", "--format=custom", "--no-password")
}

// RestorePostgres restores a custom-format archive read from r into the existing database db;
// the objects it creates are owned by role (pg_restore --no-owner --role), whatever owned
// them where the archive was made. Errors of pg_restore fail the restore (--exit-on-error).
func RestorePostgres(ctx context.Context, adminURL, db, role string, r io.Reader) error {
	env, err := pgEnv(adminURL, db)
	if err != nil {
		return err
	}
	args := []string{"--no-password", "--dbname=" + db, "--no-owner", "--no-privileges", "--exit-on-error"}
	if role != "" {
		args = append(args, "--role="+role)
	}
	return run(ctx, env, r, io.Discard, "pg_restore", args...)
}

// pgArchiveMagic is how a pg_dump custom-format archive begins.
var pgArchiveMagic = []byte("PGDMP")

// IsPostgresArchive tells whether b (an archive's first bytes) is a pg_dump custom archive.
func IsPostgresArchive(b []byte) bool { return bytes.HasPrefix(b, pgArchiveMagic) }
