// Package pods runs the pods bound to one node through CRI, as the kubelet does.
//
// Manager watches the node's pods (field selector spec.nodeName) and keeps one worker per
// pod UID. A worker's sync is level-based and idempotent — everything it needs to know is
// read back from the runtime by the pod UID and container name labels the agent puts on
// sandboxes and containers — so an agent restarted after kill -9 adopts the running
// containers as they are (the restart count is the CRI attempt number):
//
//   - the volumes are prepared (emptyDir, configMap, secret, downwardAPI, projected with a
//     bound service-account token, hostPath) under the pod's directory;
//   - the sandbox is run (CNI networking is containerd's, from the conflist the agent writes);
//   - init containers run one after another, then the containers, each image pulled per
//     imagePullPolicy, with the env resolved (env, envFrom, valueFrom) and resources passed
//     as LinuxContainerResources; exited containers restart per restartPolicy (the
//     container's own, then the pod's) with CrashLoopBackOff back-off (10 s doubling to
//     300 s, reset after 10 min running);
//   - sidecars (init containers with restartPolicy Always) start in their turn, let the
//     next init container start once their startup probe passed, keep running (restarted
//     whenever they exit) and are stopped once the regular containers ended for good;
//   - a container's postStart hook (hooks.go: exec, httpGet, sleep) runs right after its
//     start, and a failing one kills it (FailedPostStartHook);
//   - ephemeral containers (kubectl debug) start once in the pod's sandbox, sharing their
//     target container's process namespace, and are never restarted;
//   - probes (probes.go: exec, httpGet, tcpSocket, grpc) run per container and feed
//     readiness, startup and liveness;
//   - status (status.go, pure) is computed in the kubelet's form and written when it
//     changes;
//   - a pod with a deletionTimestamp is stopped gracefully (stop.go: preStop hooks within
//     the grace period, then CRI StopContainer — the stop signal, SIGKILL at the budget's
//     end — sidecars last, in reverse order), its sandbox removed, and the final DELETE
//     sent with grace 0 and the UID precondition.
package pods
