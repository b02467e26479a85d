package scheduler

import (
	"fmt"

	fwk "k8s.io/kube-scheduler/framework"
	"os"
	"testing"

	schedmetrics "k8s.io/kubernetes/pkg/scheduler/metrics"
	"log/slog"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/klog/v2"
)

type klogLogger = klog.Logger

func resourceQ(s string) resource.Quantity { return resource.MustParse(s) }

func discardLog() *slog.Logger { return slog.New(slog.DiscardHandler) }

func TestMain(m *testing.M) {
	schedmetrics.Register() // as New does: the framework runtime records into them
	os.Exit(m.Run())
}

func reasonsOf(s *fwk.Status) string {
	if s == nil {
		return ""
	}
	return fmt.Sprint(s.Reasons())
}
