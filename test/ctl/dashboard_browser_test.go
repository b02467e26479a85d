package ctl

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// chromiumPath is Debian's chromium (.ci/run installs it); the browser tests fail without it.
const chromiumPath = "/usr/bin/chromium"

// newChrome starts headless Chromium with its own profile; it stops with the test.
func newChrome(t *testing.T) context.Context {
	t.Helper()
	if _, err := os.Stat(chromiumPath); err != nil {
		t.Fatalf("headless Chromium is needed (apt-get install chromium): %v", err)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromiumPath),
		chromedp.NoSandbox, // the tests run as root
		chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("ignore-certificate-errors", true), // the server's own CA
		chromedp.WindowSize(1400, 1000),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	bctx, cancelCtx := chromedp.NewContext(actx)
	// The first run starts the browser for the context's life: no timeout on it.
	if err := chromedp.Do(bctx); err != nil {
		cancelCtx()
		cancelAlloc()
		t.Fatalf("start chromium: %v", err)
	}
	ctx, cancelTimeout := context.WithTimeout(bctx, 3*time.Minute)
	t.Cleanup(func() { cancelTimeout(); cancelCtx(); cancelAlloc() })
	return ctx
}

// navigate loads url, again when Chromium aborts the load with net::ERR_NETWORK_CHANGED: it
// watches the host's addresses, and the network tests running beside this package add and
// remove veths and bridges.
func navigate(url string) chromedp.Action[chromedp.Void] {
	return func(ctx context.Context, tg *chromedp.Target) (chromedp.Void, error) {
		var err error
		for range 5 {
			if _, err = chromedp.Navigate(url)(ctx, tg); err == nil || !strings.Contains(err.Error(), "ERR_NETWORK_CHANGED") {
				return chromedp.Void{}, err
			}
		}
		return chromedp.Void{}, err
	}
}

// loginIn logs in through the form, the way a user pastes a token.
func loginIn(t *testing.T, ctx context.Context, token string) {
	t.Helper()
	var err error
	for range 3 { // a form post that ERR_NETWORK_CHANGED aborted is sent again
		if err = chromedp.Do(ctx,
			navigate(dashboardSrv.URL+"/ui/"),
			chromedp.WaitVisible(chromedp.ID("token")),
			chromedp.SetValue(chromedp.ID("token"), token),
			chromedp.Submit(chromedp.ID("login")),
		); err != nil {
			break
		}
		if err = within(ctx, 20*time.Second, chromedp.WaitVisible(chromedp.CSS(".who"))); err == nil {
			return
		}
	}
	t.Fatalf("log in: %v", err)
}

// within runs a under a shorter deadline than ctx's.
func within(ctx context.Context, d time.Duration, a chromedp.Action[chromedp.Void]) error {
	sctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	return chromedp.Do(sctx, a)
}

// follow clicks the link sel as a user does and waits for next on the page it leads to. A
// load that Chromium aborted (ERR_NETWORK_CHANGED, see navigate) leaves an error page; the
// link's address is then loaded again, as a user would reload.
func follow(sel, next string) chromedp.Action[chromedp.Void] {
	return func(ctx context.Context, tg *chromedp.Target) (chromedp.Void, error) {
		if _, err := chromedp.WaitVisible(chromedp.CSS(sel))(ctx, tg); err != nil {
			return chromedp.Void{}, err
		}
		href, err := chromedp.Evaluate[string](fmt.Sprintf(`document.querySelector(%q).href`, sel))(ctx, tg)
		if err != nil {
			return chromedp.Void{}, err
		}
		if _, err := chromedp.Click(chromedp.CSS(sel))(ctx, tg); err != nil {
			return chromedp.Void{}, err
		}
		arrived := chromedp.Poll[chromedp.Void](fmt.Sprintf(`location.href === %q && document.querySelector(%q) !== null`, href, next),
			chromedp.WithPollingInterval(50*time.Millisecond))
		if err := within(ctx, 20*time.Second, arrived); err == nil {
			return chromedp.WaitVisible(chromedp.CSS(next))(ctx, tg)
		} else if ctx.Err() != nil {
			return chromedp.Void{}, err
		}
		if _, err := navigate(href)(ctx, tg); err != nil {
			return chromedp.Void{}, err
		}
		return chromedp.WaitVisible(chromedp.CSS(next))(ctx, tg)
	}
}

func text(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(sel))); err != nil {
		t.Fatalf("wait for %s: %v", sel, err)
	}
	s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
	if err != nil {
		t.Fatalf("text of %s: %v", sel, err)
	}
	return s
}

func TestBrowserHealthObjectDependencyAndLiveUpdate(t *testing.T) {
	dashboardSuite.Need(t)
	setup(t)
	ctx := newChrome(t)
	loginIn(t, ctx, adminToken)

	// The health table.
	row := text(t, ctx, `#health tr[data-kind="Credential"]`)
	if !strings.Contains(row, "Credential") || !strings.Contains(row, "Failed") || !strings.Contains(row, "Active") {
		t.Errorf("health row of Credential: %q", row)
	}
	if who := text(t, ctx, ".who"); who != "system:serviceaccount:kube-system:dash-admin" {
		t.Errorf("logged in as %q", who)
	}

	// Per kind, then one object.
	if err := chromedp.Do(ctx,
		follow(`#health tr[data-kind="Credential"] td a`, `#objects tr[data-name="consumer"]`),
		follow(`#objects tr[data-name="consumer"] a`, "#blocker"),
	); err != nil {
		t.Fatalf("open consumer from the list: %v", err)
	}
	if b := text(t, ctx, "#blocker"); b != "Credential/shop/taken" {
		t.Errorf("consumer's blocker: %q", b)
	}
	if n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll('#dependencies li.blocker[data-id="Credential/shop/taken"]').length`)); err != nil || n != 1 {
		t.Errorf("taken is not highlighted as the blocker in the graph: %d, %v", n, err)
	}

	// Follow a dependency.
	if err := chromedp.Do(ctx,
		follow(`#dependencies li[data-id="Credential/shop/taken"] a`, `#title .name`),
	); err != nil {
		t.Fatalf("follow the dependency: %v", err)
	}
	if title := text(t, ctx, "#title .name"); title != "taken" {
		t.Errorf("after following the dependency the page is %q, want taken", title)
	}
	if ph := text(t, ctx, "#phase"); ph != "Failed" {
		t.Errorf("taken's phase %q", ph)
	}

	// A live phase change: flip waits on a Certificate that does not exist yet.
	bg := context.Background()
	if err := applyYAML(bg, "apiVersion: kubeos.dev/v1alpha1\nkind: Credential\nmetadata: {name: flip, namespace: shop}\nspec: {type: password, dependsOn: [{kind: Certificate, name: later}]}\n"); err != nil {
		t.Fatal(err)
	}
	if err := waitPhase(bg, "credentials", "shop", "flip", "Pending"); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx,
		navigate(dashboardSrv.URL+"/ui/objects/credentials/shop/flip"),
		chromedp.WaitVisible(chromedp.CSS(`#live[data-state="live"]`)),
		chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			_, err := chromedp.Evaluate[bool](`window.kubeNoReload = true`)(ctx, tg)
			return err
		}),
	); err != nil {
		t.Fatalf("open flip: %v", err)
	}
	if ph := text(t, ctx, "#phase"); ph != "Pending" {
		t.Fatalf("flip's phase %q, want Pending", ph)
	}
	if err := applyYAML(bg, "apiVersion: kubeos.dev/v1alpha1\nkind: Certificate\nmetadata: {name: later, namespace: shop}\nspec: {isCA: true, commonName: later}\n"); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Run(ctx,
		chromedp.Poll[chromedp.Void](`document.getElementById('phase') !== null && document.getElementById('phase').textContent === 'Active'`,
			chromedp.WithPollingTimeout(90*time.Second), chromedp.WithPollingInterval(100*time.Millisecond))); err != nil {
		p, _ := phaseOf(bg, "credentials", "shop", "flip")
		t.Fatalf("the page did not show flip Active (API says %q): %v", p, err)
	}
	marker, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`window.kubeNoReload === true`))
	if err != nil {
		t.Fatal(err)
	}
	if !marker {
		t.Errorf("the page was reloaded: the change should arrive over the stream")
	}
}

func TestBrowserViewerIsRefusedAnAction(t *testing.T) {
	dashboardSuite.Need(t)
	setup(t)
	ctx := newChrome(t)
	loginIn(t, ctx, viewerToken)
	if err := chromedp.Do(ctx,
		chromedp.WaitVisible(chromedp.ID("refused")), // not theirs: health across all namespaces
		navigate(dashboardSrv.URL+"/ui/objects/credentials/shop/app"),
		chromedp.WaitVisible(chromedp.ID("denied-delete")),
		chromedp.Click(chromedp.CSS("#denied-delete summary")),
		chromedp.WaitVisible(chromedp.CSS("#denied-delete .why")),
	); err != nil {
		t.Fatalf("viewer on app: %v", err)
	}
	why := text(t, ctx, "#denied-delete .why")
	if n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll('#actions button[id^="action-"]').length`)); err != nil || n != 0 {
		t.Errorf("the viewer is offered %d action(s) (%v)", n, err)
	}
	if !strings.Contains(why, "may not delete credentials.kubeos.dev \"app\" in namespace shop") {
		t.Errorf("why can't I: %q", why)
	}
	// The viewer still sees the object, and nothing of another namespace.
	if ph := text(t, ctx, "#phase"); ph != "Active" {
		t.Errorf("app's phase for the viewer: %q", ph)
	}
	if err := chromedp.Do(ctx, navigate(dashboardSrv.URL+"/ui/objects/credentials/elsewhere/secret-one")); err != nil {
		t.Fatal(err)
	}
	if msg := text(t, ctx, "#error-message"); !strings.Contains(msg, "forbidden") {
		t.Errorf("another namespace: %q", msg)
	}
	if _, err := dyn.Resource(gvr("credentials")).Namespace("shop").Get(context.Background(), "app", metav1.GetOptions{}); err != nil {
		t.Error(fmt.Errorf("app: %w", err))
	}
}
