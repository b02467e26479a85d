package servertest

import (
	"sync"
	"testing"
)

// Fixture is what one suite of tests shares — a server, the processes and files around it —
// started when the first of the suite's tests asks for it with Need. A test package that
// holds several suites (one test binary instead of one per suite: each binary that embeds
// the server costs a link of ~35 s of CPU) starts only the fixtures the chosen tests need,
// so each suite still runs alone with -run, and its TestMain stops them all through Main.
//
//	var crd = servertest.NewFixture("crd", func(fx *servertest.Fixture) error {
//		dir, err := servertest.TempDir()
//		if err != nil {
//			return err
//		}
//		fx.Cleanup(func() { os.RemoveAll(dir) })
//		crdSrv, err = servertest.Start(dir, nil)
//		if err != nil {
//			return fmt.Errorf("start kube server: %w", err)
//		}
//		fx.Cleanup(func() { crdSrv.Stop() })
//		return nil
//	})
//
//	func TestX(t *testing.T) {
//		crd.Need(t)
//		…
//	}
type Fixture struct {
	name  string
	start func(*Fixture) error

	once     sync.Once
	err      error
	mu       sync.Mutex
	cleanups []func()
}

// NewFixture is a fixture that start sets up on first use; start registers with
// fx.Cleanup what undoes each step (as TestMain's defers did), and those run in reverse at
// Stop, or at once when start fails.
func NewFixture(name string, start func(fx *Fixture) error) *Fixture {
	return &Fixture{name: name, start: start}
}

// Cleanup registers f to run when the fixture stops (last registered, first run).
func (fx *Fixture) Cleanup(f func()) {
	fx.mu.Lock()
	defer fx.mu.Unlock()
	fx.cleanups = append(fx.cleanups, f)
}

// Need starts the fixture unless it has started, and fails t when it could not start
// (every later test of the suite then fails with the same error).
func (fx *Fixture) Need(t testing.TB) {
	t.Helper()
	fx.once.Do(func() {
		if fx.err = fx.start(fx); fx.err != nil {
			fx.Stop()
		}
	})
	if fx.err != nil {
		t.Fatalf("%s fixture: %v", fx.name, fx.err)
	}
}

// Stop runs the registered cleanups in reverse order; it does nothing for a fixture that
// never started, and is safe to call again.
func (fx *Fixture) Stop() {
	fx.mu.Lock()
	cs := fx.cleanups
	fx.cleanups = nil
	fx.mu.Unlock()
	for i := len(cs) - 1; i >= 0; i-- {
		cs[i]()
	}
}

// Main runs the package's tests, then stops the fixtures (in reverse order) and returns the
// exit code for os.Exit: TestMain of a package of several suites is
//
//	func TestMain(m *testing.M) { os.Exit(servertest.Main(m, crd, codegen)) }
func Main(m *testing.M, fixtures ...*Fixture) int {
	code := m.Run()
	for i := len(fixtures) - 1; i >= 0; i-- {
		fixtures[i].Stop()
	}
	return code
}
