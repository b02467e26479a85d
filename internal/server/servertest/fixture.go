package servertest

import (
	"sync"
	"sync/atomic"
	"testing"
)

// Fixture is what one suite of tests shares — a server, the processes and files around it —
// started when the first of the suite's tests asks for it with Need. A test package that
// holds several suites (one test binary instead of one per suite: each binary that embeds
// the server costs a link of ~35 s of CPU) starts only the fixtures the chosen tests need,
// so each suite still runs alone with -run, and its TestMain stops them through Main.
//
// One suite's fixture runs at a time: Need stops the package's other fixtures that no
// running test needs (an idle server still costs several percent of a core). A package
// keeps each suite's tests together, and in the order they had in the suite's own package,
// in files named <suite>_<former name>_test.go, since Go runs tests in file-name order; a
// fixture needed again after it stopped starts afresh (go test -count=2, -shuffle).
//
//	var crdSuite = servertest.NewFixture("crd", func(fx *servertest.Fixture) error {
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
//		crdSuite.Need(t)
//		…
//	}
type Fixture struct {
	name  string
	start func(*Fixture) error

	mu      sync.Mutex // held while starting or stopping
	running bool
	users   int   // tests that called Need and have not ended
	err     error // start's error: every later Need fails with it
	failed  atomic.Bool

	cmu      sync.Mutex
	cleanups []func()
}

// fixtures are the process's fixtures (one test package's), for Need to stop the idle ones.
var fixtures struct {
	mu  sync.Mutex
	all []*Fixture
}

// NewFixture is a fixture that start sets up on first use; start registers with
// fx.Cleanup what undoes each step (as TestMain's defers did), and those run in reverse
// when the fixture stops, or at once when start fails.
func NewFixture(name string, start func(fx *Fixture) error) *Fixture {
	fx := &Fixture{name: name, start: start}
	fixtures.mu.Lock()
	fixtures.all = append(fixtures.all, fx)
	fixtures.mu.Unlock()
	return fx
}

// Cleanup registers f to run when the fixture stops (last registered, first run).
func (fx *Fixture) Cleanup(f func()) {
	fx.cmu.Lock()
	defer fx.cmu.Unlock()
	fx.cleanups = append(fx.cleanups, f)
}

// Need starts the fixture unless it runs, after stopping the package's other fixtures that
// no running test needs, and fails t when it could not start. The fixture counts t as a
// user until t ends.
func (fx *Fixture) Need(t testing.TB) {
	t.Helper()
	fixtures.mu.Lock()
	others := append([]*Fixture(nil), fixtures.all...)
	fixtures.mu.Unlock()
	for _, o := range others {
		if o != fx {
			o.stopIdle()
		}
	}
	fx.mu.Lock()
	if !fx.running && fx.err == nil {
		if err := fx.start(fx); err != nil {
			fx.err = err
			fx.failed.Store(true)
			fx.runCleanups()
		} else {
			fx.running = true
		}
	}
	err := fx.err
	if err == nil {
		fx.users++
	}
	fx.mu.Unlock()
	if err != nil {
		t.Fatalf("%s fixture: %v", fx.name, err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			fx.failed.Store(true)
		}
		fx.mu.Lock()
		fx.users--
		fx.mu.Unlock()
	})
}

// Failed reports whether a test that needed the fixture failed, or the fixture could not
// start (for cleanups that keep or print the logs of a failed suite).
func (fx *Fixture) Failed() bool { return fx.failed.Load() }

// Stop stops the fixture if it runs; Main calls it.
func (fx *Fixture) Stop() {
	fx.mu.Lock()
	defer fx.mu.Unlock()
	if fx.running {
		fx.running = false
		fx.runCleanups()
	}
}

func (fx *Fixture) stopIdle() {
	fx.mu.Lock()
	defer fx.mu.Unlock()
	if fx.running && fx.users == 0 {
		fx.running = false
		fx.runCleanups()
	}
}

func (fx *Fixture) runCleanups() {
	fx.cmu.Lock()
	cs := fx.cleanups
	fx.cleanups = nil
	fx.cmu.Unlock()
	for i := len(cs) - 1; i >= 0; i-- {
		cs[i]()
	}
}

// Main runs the package's tests, then stops the fixtures (in reverse order) and returns the
// exit code for os.Exit: TestMain of a package of several suites is
//
//	func TestMain(m *testing.M) { os.Exit(servertest.Main(m, apiSuite, crdSuite)) }
func Main(m *testing.M, fixtures ...*Fixture) int {
	code := m.Run()
	for i := len(fixtures) - 1; i >= 0; i-- {
		fixtures[i].Stop()
	}
	return code
}
