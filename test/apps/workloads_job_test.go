package apps

import (
	"context"
	"fmt"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"kubeos.dev/kube/internal/simnode"
)

// jobSpec is a Job of pods that run for runTime (simulated) and then exit with exit (0
// when empty).
func jobSpec(name string, completions, parallelism int32, runTime, exit string) *batchv1.Job {
	l := map[string]string{"job": name}
	if exit != "" {
		l[ExitLabel] = exit
	}
	tmpl := podTemplate(l)
	tmpl.Spec.RestartPolicy = corev1.RestartPolicyNever
	if runTime != "" {
		tmpl.Annotations = map[string]string{simnode.RunTimeAnnotation: runTime}
	}
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       batchv1.JobSpec{Completions: ptr.To(completions), Parallelism: ptr.To(parallelism), Template: tmpl},
	}
}

func getJob(t *testing.T, cs kubernetes.Interface, ns, name string) *batchv1.Job {
	t.Helper()
	j, err := cs.BatchV1().Jobs(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return j
}

func jobCondition(j *batchv1.Job, ct batchv1.JobConditionType) *batchv1.JobCondition {
	for i := range j.Status.Conditions {
		if j.Status.Conditions[i].Type == ct && j.Status.Conditions[i].Status == corev1.ConditionTrue {
			return &j.Status.Conditions[i]
		}
	}
	return nil
}

// waitJob waits until the Job has the condition ct (True) and returns it.
func waitJob(t *testing.T, cs kubernetes.Interface, ns, name string, ct batchv1.JobConditionType, d time.Duration) *batchv1.Job {
	t.Helper()
	var j *batchv1.Job
	eventually(t, d, func() error {
		j = getJob(t, cs, ns, name)
		if jobCondition(j, ct) == nil {
			return fmt.Errorf("job %s has no %s condition: %+v", name, ct, j.Status)
		}
		return nil
	})
	return j
}

// TestJobCompletionsAndWait: completions 4 with parallelism 2 runs at most two pods at a
// time and four to success, each counted once (the tracking finalizer removed), and
// kubectl wait --for=condition=complete returns.
func TestJobCompletionsAndWait(t *testing.T) {
	appsSuite.Need(t)
	t.Parallel()
	cs := clientset(t)
	ns := namespace(t, cs, "job-completions")
	dumpOnFailure(t, ns)
	ctx := ctxT(t, 3*time.Minute)
	w, err := cs.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	maxActive := make(chan int, 1)
	go func() {
		active, most := map[string]bool{}, 0
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed || p.DeletionTimestamp != nil || ev.Type == "DELETED" {
				delete(active, p.Name)
			} else {
				active[p.Name] = true
			}
			most = max(most, len(active))
		}
		maxActive <- most
	}()
	if _, err := cs.BatchV1().Jobs(ns).Create(ctx, jobSpec("work", 4, 2, "500ms", ""), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	k := newKubectl(t, "1.33")
	k.ok("", "-n", ns, "wait", "--for=condition=complete", "job/work", "--timeout=120s")
	j := getJob(t, cs, ns, "work")
	if s := j.Status; s.Succeeded != 4 || s.Failed != 0 || s.Active != 0 || s.CompletionTime == nil || s.StartTime == nil {
		t.Errorf("status %+v, want 4 succeeded", s)
	}
	if c := jobCondition(j, batchv1.JobSuccessCriteriaMet); c == nil || c.Reason != batchv1.JobReasonCompletionsReached {
		t.Errorf("SuccessCriteriaMet = %+v, want reason CompletionsReached", c)
	}
	pods := podsOf(t, cs, ns, "job=work")
	if len(pods) != 4 {
		t.Errorf("%d pods, want 4", len(pods))
	}
	for _, p := range pods {
		for _, f := range p.Finalizers {
			if f == batchv1.JobTrackingFinalizer {
				t.Errorf("pod %s keeps the job-tracking finalizer", p.Name)
			}
		}
	}
	w.Stop()
	if most := <-maxActive; most > 2 {
		t.Errorf("%d pods ran at once, parallelism is 2", most)
	}
	// kubectl 1.27 waits the same way on a finished Job.
	newKubectl(t, "1.27").ok("", "-n", ns, "wait", "--for=condition=complete", "job/work", "--timeout=30s")
}

// TestJobIndexed: an Indexed Job's pods carry their completion index (annotation, label,
// hostname <job>-<index>) and completedIndexes lists them all.
func TestJobIndexed(t *testing.T) {
	appsSuite.Need(t)
	t.Parallel()
	cs := clientset(t)
	ns := namespace(t, cs, "job-indexed")
	dumpOnFailure(t, ns)
	ctx := ctxT(t, 3*time.Minute)
	j := jobSpec("idx", 3, 3, "200ms", "")
	j.Spec.CompletionMode = ptr.To(batchv1.IndexedCompletion)
	if _, err := cs.BatchV1().Jobs(ns).Create(ctx, j, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	j = waitJob(t, cs, ns, "idx", batchv1.JobComplete, 90*time.Second)
	if j.Status.CompletedIndexes != "0-2" || j.Status.Succeeded != 3 {
		t.Errorf("completedIndexes %q succeeded %d, want 0-2 and 3", j.Status.CompletedIndexes, j.Status.Succeeded)
	}
	seen := map[string]bool{}
	for _, p := range podsOf(t, cs, ns, "job=idx") {
		i := p.Annotations[batchv1.JobCompletionIndexAnnotation]
		seen[i] = true
		if p.Labels[batchv1.JobCompletionIndexAnnotation] != i || p.Spec.Hostname != "idx-"+i {
			t.Errorf("pod %s index %q: label %q hostname %q", p.Name, i, p.Labels[batchv1.JobCompletionIndexAnnotation], p.Spec.Hostname)
		}
	}
	if len(seen) != 3 || !seen["0"] || !seen["1"] || !seen["2"] {
		t.Errorf("indexes %v, want 0, 1, 2", seen)
	}
}

// TestJobFailures: backoffLimit 1 fails the Job after two failed pods with reason
// BackoffLimitExceeded; a podFailurePolicy FailJob rule on exit code 42 fails it at the
// first such exit with reason PodFailurePolicy.
func TestJobFailures(t *testing.T) {
	appsSuite.Need(t)
	t.Parallel()
	cs := clientset(t)
	ns := namespace(t, cs, "job-failures")
	dumpOnFailure(t, ns)
	ctx := ctxT(t, 3*time.Minute)

	b := jobSpec("backoff", 1, 1, "", "1")
	b.Spec.BackoffLimit = ptr.To[int32](1)
	if _, err := cs.BatchV1().Jobs(ns).Create(ctx, b, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	p := jobSpec("policy", 3, 1, "", "42")
	p.Spec.BackoffLimit = ptr.To[int32](6)
	p.Spec.PodFailurePolicy = &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{{
		Action:      batchv1.PodFailurePolicyActionFailJob,
		OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{Operator: batchv1.PodFailurePolicyOnExitCodesOpIn, Values: []int32{42}},
	}}}
	if _, err := cs.BatchV1().Jobs(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	pj := waitJob(t, cs, ns, "policy", batchv1.JobFailed, 60*time.Second)
	if c := jobCondition(pj, batchv1.JobFailed); c.Reason != batchv1.JobReasonPodFailurePolicy || pj.Status.Failed != 1 {
		t.Errorf("policy Job: Failed reason %q after %d failures, want PodFailurePolicy after 1", c.Reason, pj.Status.Failed)
	}
	if c := jobCondition(pj, batchv1.JobFailureTarget); c == nil {
		t.Errorf("policy Job has no FailureTarget condition: %+v", pj.Status.Conditions)
	}
	// The second pod comes after the controller's 10 s failure back-off.
	bj := waitJob(t, cs, ns, "backoff", batchv1.JobFailed, 90*time.Second)
	if c := jobCondition(bj, batchv1.JobFailed); c.Reason != batchv1.JobReasonBackoffLimitExceeded || bj.Status.Failed != 2 {
		t.Errorf("backoff Job: Failed reason %q after %d failures, want BackoffLimitExceeded after 2", c.Reason, bj.Status.Failed)
	}
}

// TestJobSuspend: a suspended Job makes no pods and says Suspended; resumed it runs.
func TestJobSuspend(t *testing.T) {
	appsSuite.Need(t)
	t.Parallel()
	cs := clientset(t)
	ns := namespace(t, cs, "job-suspend")
	dumpOnFailure(t, ns)
	ctx := ctxT(t, 3*time.Minute)
	j := jobSpec("later", 1, 1, "200ms", "")
	j.Spec.Suspend = ptr.To(true)
	if _, err := cs.BatchV1().Jobs(ns).Create(ctx, j, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitJob(t, cs, ns, "later", batchv1.JobSuspended, 30*time.Second)
	if n := len(podsOf(t, cs, ns, "job=later")); n != 0 {
		t.Errorf("suspended Job has %d pods", n)
	}
	if _, err := cs.BatchV1().Jobs(ns).Patch(ctx, "later", types.MergePatchType, []byte(`{"spec":{"suspend":false}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	j = waitJob(t, cs, ns, "later", batchv1.JobComplete, 60*time.Second)
	if j.Status.Succeeded != 1 {
		t.Errorf("resumed Job succeeded %d, want 1", j.Status.Succeeded)
	}
}

// TestJobTTLAfterFinished: ttlSecondsAfterFinished 0 deletes the Job once it completes,
// and its pods with it.
func TestJobTTLAfterFinished(t *testing.T) {
	appsSuite.Need(t)
	t.Parallel()
	cs := clientset(t)
	ns := namespace(t, cs, "job-ttl")
	dumpOnFailure(t, ns)
	ctx := ctxT(t, 3*time.Minute)
	j := jobSpec("short", 1, 1, "200ms", "")
	j.Spec.TTLSecondsAfterFinished = ptr.To[int32](0)
	created, err := cs.BatchV1().Jobs(ns).Create(ctx, j, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 90*time.Second, func() error {
		j, err := cs.BatchV1().Jobs(ns).Get(ctx, "short", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		return fmt.Errorf("job still there: %+v", j.Status)
	})
	eventually(t, 60*time.Second, func() error {
		for _, p := range podsOf(t, cs, ns, "job=short") {
			if ref := metav1.GetControllerOf(&p); ref != nil && ref.UID == created.UID {
				return fmt.Errorf("pod %s of the deleted Job remains", p.Name)
			}
		}
		return nil
	})
}

// TestCronJob: a CronJob of schedule "* * * * *" creates Job <name>-<minutes since the
// epoch> at the next minute, records lastScheduleTime and, once it succeeds,
// lastSuccessfulTime.
func TestCronJob(t *testing.T) {
	appsSuite.Need(t)
	t.Parallel()
	cs := clientset(t)
	ns := namespace(t, cs, "cronjob")
	dumpOnFailure(t, ns)
	ctx := ctxT(t, 4*time.Minute)
	j := jobSpec("tick", 1, 1, "200ms", "")
	cj, err := cs.BatchV1().CronJobs(ns).Create(ctx, &batchv1.CronJob{
		ObjectMeta: metav1.ObjectMeta{Name: "tick"},
		Spec: batchv1.CronJobSpec{
			Schedule: "* * * * *", ConcurrencyPolicy: batchv1.ForbidConcurrent,
			JobTemplate: batchv1.JobTemplateSpec{Spec: j.Spec},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var job batchv1.Job
	eventually(t, 130*time.Second, func() error {
		l, err := cs.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		if len(l.Items) == 0 {
			return fmt.Errorf("no Job yet")
		}
		job = l.Items[0]
		return nil
	})
	if ref := metav1.GetControllerOf(&job); ref == nil || ref.Kind != "CronJob" || ref.UID != cj.UID {
		t.Errorf("Job %s controller %+v, want the CronJob", job.Name, ref)
	}
	sched, err := time.Parse(time.RFC3339, job.Annotations[batchv1.CronJobScheduledTimestampAnnotation])
	if err != nil {
		t.Fatalf("Job %s scheduled-timestamp annotation: %v", job.Name, err)
	}
	if want := fmt.Sprintf("tick-%d", sched.Unix()/60); job.Name != want {
		t.Errorf("Job name %s, want %s", job.Name, want)
	}
	waitJob(t, cs, ns, job.Name, batchv1.JobComplete, 60*time.Second)
	eventually(t, 60*time.Second, func() error {
		got, err := cs.BatchV1().CronJobs(ns).Get(ctx, "tick", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if got.Status.LastScheduleTime == nil || got.Status.LastSuccessfulTime == nil {
			return fmt.Errorf("status %+v", got.Status)
		}
		return nil
	})
}
