#!/usr/bin/env bash
# kubectl.sh: the kubectl end-to-end script. It drives one kubectl binary ($KUBECTL, default
# "kubectl") against the server of $KUBECONFIG and asserts, step by step, what a user would
# check. Everything it creates lives in its own namespace, e2e-<version>-<random>, which it
# deletes at the end (a failed run leaves it for inspection), so several kubectl versions can
# run one after the other against one server. The first failing step stops the script with a
# "FAIL [step]: ..." message.
#
#   KUBECTL=kubectl.1.27 KUBECONFIG=/path/to/kubeconfig test/e2e/kubectl.sh
set -Eeuo pipefail

KUBECTL=${KUBECTL:-kubectl}
: "${KUBECONFIG:?set KUBECONFIG to the kubeconfig of the server}"
export KUBECONFIG

STEP="setup"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/kubectl-e2e.XXXXXX")
BG_PIDS=()

cleanup() {
	local pid
	for pid in "${BG_PIDS[@]}"; do
		kill "$pid" 2>/dev/null || true
	done
	rm -rf "$WORK"
}
trap cleanup EXIT
# on_err reports a failed command once, with the line of the script's top level it ran
# from (a failure inside a command substitution is reported by the line that used it).
on_err() {
	((BASH_SUBSHELL == 0)) || return 0
	local line=${BASH_LINENO[-2]}
	echo "FAIL [$STEP]: command failed (exit $1) at line $line: $(sed -n "${line}p" "$0" | sed 's/^[[:space:]]*//')" >&2
}
trap 'on_err $?' ERR

step() {
	STEP="$*"
	echo "=== $STEP"
}

fail() {
	echo "FAIL [$STEP]: $*" >&2
	exit 1
}

k() { "$KUBECTL" "$@"; }
kn() { "$KUBECTL" -n "$NS" "$@"; }

# expect_eq ACTUAL EXPECTED WHAT
expect_eq() {
	[[ "$1" == "$2" ]] || fail "$3: got '$1', want '$2'"
}

# expect_contains TEXT NEEDLE WHAT (NEEDLE is a fixed string)
expect_contains() {
	grep -qF -- "$2" <<<"$1" || fail "$3: output does not contain '$2':"$'\n'"$1"
}

# expect_match TEXT REGEX WHAT (extended regex, matched per line)
expect_match() {
	grep -qE -- "$2" <<<"$1" || fail "$3: no line matches /$2/ in:"$'\n'"$1"
}

# expect_failure WHAT NEEDLE CMD...: CMD must exit non-zero and print NEEDLE.
expect_failure() {
	local what=$1 needle=$2 out
	shift 2
	if out=$("$@" 2>&1); then
		fail "$what: succeeded, want a failure; output:"$'\n'"$out"
	fi
	expect_contains "$out" "$needle" "$what"
}

# jp OBJECT JSONPATH: one field of an object in $NS. A failed get fails and prints a marker,
# so that a comparison with an expected empty value does not pass by accident.
jp() { kn get "$1" -o "jsonpath=$2" || { echo "<get $1 failed>" && return 1; }; }

# wait_until SECONDS WHAT CMD...: retry CMD every 0.2 s until it succeeds.
wait_until() {
	local secs=$1 what=$2 deadline
	shift 2
	deadline=$((SECONDS + secs))
	until "$@" >/dev/null 2>&1; do
		((SECONDS < deadline)) || fail "$what: not true within ${secs}s"
		sleep 0.2
	done
}

gone() { ! kn get "$1" -o name >/dev/null 2>&1; }

version=$(k version --client -o json | sed -n 's/.*"gitVersion": *"v\([0-9]*\)\.\([0-9]*\)\..*/\1-\2/p')
[[ -n "$version" ]] || fail "cannot read the client version of $KUBECTL"
NS="e2e-${version}-$(printf '%04x%04x' "$RANDOM" "$RANDOM")"
echo "kubectl $(k version --client -o json | sed -n 's/.*"gitVersion": *"\([^"]*\)".*/\1/p'), namespace $NS"

# ---------------------------------------------------------------------------------------
step "api-resources lists configmaps with short name cm"
out=$(k api-resources)
expect_match "$out" '^configmaps +cm +v1 +true +ConfigMap$' "api-resources"
expect_match "$out" '^namespaces +ns +v1 +false +Namespace$' "api-resources"
expect_match "$out" '^roles +rbac.authorization.k8s.io/v1 +true +Role$' "api-resources"
out=$(k api-resources -o wide)
expect_match "$out" '^configmaps +cm +v1 +true +ConfigMap +create,delete,deletecollection,get,list,patch,update,watch *$' "api-resources -o wide (verbs)"
out=$(k api-resources --namespaced=false -o name)
expect_contains "$out" "namespaces" "api-resources --namespaced=false"
grep -qx configmaps <<<"$out" && fail "api-resources --namespaced=false lists configmaps"

step "api-versions lists v1 and rbac.authorization.k8s.io/v1"
out=$(k api-versions)
grep -qx v1 <<<"$out" || fail "api-versions: no line 'v1' in:"$'\n'"$out"
grep -qx rbac.authorization.k8s.io/v1 <<<"$out" || fail "api-versions: no rbac.authorization.k8s.io/v1 in:"$'\n'"$out"

# ---------------------------------------------------------------------------------------
step "create namespace"
out=$(k create namespace "$NS")
expect_eq "$out" "namespace/$NS created" "create namespace"
expect_eq "$(k get namespace "$NS" -o jsonpath='{.status.phase}')" "Active" "namespace phase"
expect_eq "$(k get namespace "$NS" -o 'jsonpath={.metadata.labels.kubernetes\.io/metadata\.name}')" "$NS" "namespace name label"
expect_failure "create the namespace again" "AlreadyExists" k create namespace "$NS"
expect_match "$(k get namespace "$NS")" "^$NS +Active +[0-9]+s\$" "get namespace (table)"

step "create -f and get -o yaml|json|wide|jsonpath|name"
cat >"$WORK/cm1.yaml" <<EOF
apiVersion: v1
kind: ConfigMap
metadata:
  name: cm1
  namespace: $NS
data:
  color: blue
  size: "3"
EOF
out=$(k create -f "$WORK/cm1.yaml")
expect_eq "$out" "configmap/cm1 created" "create -f"
expect_failure "create -f of an existing object" "AlreadyExists" k create -f "$WORK/cm1.yaml"
out=$(kn get configmap cm1 -o yaml)
expect_match "$out" '^kind: ConfigMap$' "get -o yaml"
expect_match "$out" '^  color: blue$' "get -o yaml"
expect_match "$out" "^  namespace: $NS\$" "get -o yaml"
expect_match "$out" '^  uid: [0-9a-f-]{36}$' "get -o yaml"
expect_match "$out" '^  resourceVersion: "[0-9]+"$' "get -o yaml"
expect_match "$out" '^  creationTimestamp: "[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:]{8}Z"$' "get -o yaml"
out=$(kn get cm cm1 -o json)
expect_contains "$out" '"kind": "ConfigMap"' "get -o json"
expect_contains "$out" '"apiVersion": "v1"' "get -o json"
expect_contains "$out" '"size": "3"' "get -o json"
out=$(kn get cm -o wide)
expect_match "$out" '^NAME +DATA +AGE$' "get -o wide header"
expect_match "$out" '^cm1 +2 +[0-9]+s$' "get -o wide row"
out=$(kn get cm cm1)
expect_match "$out" '^cm1 +2 +[0-9]+s$' "get (table)"
expect_eq "$(jp cm/cm1 '{.data.color}')" "blue" "get -o jsonpath"
# kube-root-ca.crt is published in every namespace, as upstream's controller does.
expect_eq "$(kn get cm -o name --field-selector metadata.name!=kube-root-ca.crt)" "configmap/cm1" "get -o name"
expect_failure "get a missing object" 'configmaps "nope" not found' kn get cm nope
out=$(k get cm -A -l tier=none 2>&1)
expect_eq "$out" "No resources found" "get -A without a match"
out=$(k get cm -A --field-selector metadata.name=cm1 --show-labels)
expect_match "$out" '^NAMESPACE +NAME +DATA +AGE +LABELS$' "get -A --show-labels header"
expect_match "$out" "^$NS +cm1 +2 +[0-9]+s +<none>\$" "get -A --show-labels row"
sed -e 's/name: cm1/name: bad/' -e 's/^data:$/  labels: {"-x": "y"}\ndata:/' "$WORK/cm1.yaml" >"$WORK/bad.yaml"
out=$(k create -f "$WORK/bad.yaml" 2>&1 || true)
expect_contains "$out" 'The ConfigMap "bad" is invalid' "create an invalid object"
expect_contains "$out" "metadata.labels: Invalid value: \"-x\"" "create an invalid object (cause)"

step "apply -f creates, then configures"
cat >"$WORK/cm2.yaml" <<EOF
apiVersion: v1
kind: ConfigMap
metadata:
  name: cm2
  namespace: $NS
  labels:
    app: e2e
data:
  a: "1"
  b: "2"
EOF
out=$(k apply -f "$WORK/cm2.yaml")
expect_eq "$out" "configmap/cm2 created" "apply (create)"
out=$(k apply -f "$WORK/cm2.yaml")
expect_eq "$out" "configmap/cm2 unchanged" "apply (no change)"
sed -i -e 's/  a: "1"/  a: "10"/' -e '/  b: "2"/d' "$WORK/cm2.yaml"
out=$(k apply -f "$WORK/cm2.yaml")
expect_eq "$out" "configmap/cm2 configured" "apply (change)"
expect_eq "$(jp cm/cm2 '{.data.a}')" "10" "apply changed data.a"
expect_eq "$(jp cm/cm2 '{.data.b}')" "" "apply removed data.b (three-way merge)"
expect_contains "$(jp cm/cm2 '{.metadata.annotations}')" "kubectl.kubernetes.io/last-applied-configuration" "apply annotation"
out=$(k apply --server-side -f "$WORK/cm2.yaml" --force-conflicts)
expect_eq "$out" "configmap/cm2 serverside-applied" "apply --server-side"

step "diff shows a change and changes nothing (a dry-run patch)"
sed 's/  a: "10"/  a: "diff"/' "$WORK/cm2.yaml" >"$WORK/cm2-diff.yaml"
rc=0
out=$(k diff -f "$WORK/cm2-diff.yaml" 2>&1) || rc=$?
expect_eq "$rc" "1" "diff exit code (differences found)"
expect_match "$out" '^\+  a: diff$' "diff output"
expect_eq "$(jp cm/cm2 '{.data.a}')" "10" "data after diff"
out=$(k diff -f "$WORK/cm2.yaml" 2>&1) || fail "diff without a change: $out"

step "label"
out=$(kn label cm cm1 tier=web)
expect_eq "$out" "configmap/cm1 labeled" "label"
expect_eq "$(jp cm/cm1 '{.metadata.labels.tier}')" "web" "label value"
expect_eq "$(kn get cm -l tier=web -o name)" "configmap/cm1" "get -l tier=web"
expect_failure "label without --overwrite" "already has a value" kn label cm cm1 tier=db
kn label cm cm1 tier=db --overwrite >/dev/null
expect_eq "$(jp cm/cm1 '{.metadata.labels.tier}')" "db" "label --overwrite"
kn label cm cm1 tier- >/dev/null
expect_eq "$(jp cm/cm1 '{.metadata.labels.tier}')" "" "label removed"
kn label cm cm1 tier=web >/dev/null

step "annotate"
out=$(kn annotate cm cm1 note='hello world')
# kubectl 1.27 prints "annotate", later versions "annotated".
expect_match "$out" '^configmap/cm1 annotated?$' "annotate"
expect_eq "$(jp cm/cm1 '{.metadata.annotations.note}')" "hello world" "annotation value"

step "patch --type json"
out=$(kn patch cm cm1 --type json -p '[{"op":"add","path":"/data/viaJSON","value":"j"},{"op":"replace","path":"/data/color","value":"red"}]')
expect_eq "$out" "configmap/cm1 patched" "patch --type json"
expect_eq "$(jp cm/cm1 '{.data.viaJSON}/{.data.color}')" "j/red" "json patch result"
expect_failure "json patch test op (422)" "The request is invalid" kn patch cm cm1 --type json -p '[{"op":"test","path":"/data/color","value":"green"}]'
expect_eq "$(jp cm/cm1 '{.data.color}')" "red" "failed json patch changed nothing"

step "patch --type merge"
out=$(kn patch cm cm1 --type merge -p '{"data":{"viaMerge":"m","viaJSON":null}}')
expect_eq "$out" "configmap/cm1 patched" "patch --type merge"
expect_eq "$(jp cm/cm1 '{.data.viaMerge}|{.data.viaJSON}')" "m|" "merge patch result"

step "patch --type strategic (merge by key) vs merge (replace list)"
cat >"$WORK/sa.yaml" <<EOF
apiVersion: v1
kind: ServiceAccount
metadata:
  name: robot
  namespace: $NS
secrets:
- name: first
EOF
k create -f "$WORK/sa.yaml" >/dev/null
out=$(kn patch serviceaccount robot --type strategic -p '{"secrets":[{"name":"second"}]}')
expect_eq "$out" "serviceaccount/robot patched" "patch --type strategic"
expect_eq "$(jp sa/robot '{.secrets[*].name}')" "second first" "strategic patch merges list by name"
kn patch sa robot -p '{"secrets":[{"$patch":"delete","name":"first"}]}' >/dev/null
expect_eq "$(jp sa/robot '{.secrets[*].name}')" "second" "strategic \$patch: delete (default --type)"
kn patch sa robot --type merge -p '{"secrets":[{"name":"third"}]}' >/dev/null
expect_eq "$(jp sa/robot '{.secrets[*].name}')" "third" "merge patch replaces the list"
out=$(kn patch cm cm1 --type strategic -p '{"data":{"viaStrategic":"s"}}')
expect_eq "$out" "configmap/cm1 patched" "patch --type strategic configmap"
expect_eq "$(jp cm/cm1 '{.data.viaStrategic}/{.data.viaMerge}')" "s/m" "strategic patch result"
out=$(kn patch cm cm1 --type merge -p '{"data":{"viaStrategic":"s"}}')
expect_eq "$out" "configmap/cm1 patched (no change)" "patch without a change"

step "edit (EDITOR is a script)"
cat >"$WORK/editor.sh" <<'EOF'
#!/bin/sh
# Sets data.color to "edited" and adds data.editedBy in the file kubectl hands over.
sed -i -e 's/^  color: .*/  color: edited/' -e 's/^data:$/data:\n  editedBy: e2e/' "$1"
EOF
chmod +x "$WORK/editor.sh"
out=$(env -u KUBE_EDITOR EDITOR="$WORK/editor.sh" "$KUBECTL" -n "$NS" edit cm cm1)
expect_eq "$out" "configmap/cm1 edited" "edit"
expect_eq "$(jp cm/cm1 '{.data.color}/{.data.editedBy}/{.metadata.labels.tier}')" "edited/e2e/web" "edited object"
cat >"$WORK/noop-editor.sh" <<'EOF'
#!/bin/sh
exit 0
EOF
chmod +x "$WORK/noop-editor.sh"
out=$(env -u KUBE_EDITOR EDITOR="$WORK/noop-editor.sh" "$KUBECTL" -n "$NS" edit cm cm1 2>&1)
expect_contains "$out" "Edit cancelled, no changes made." "edit without changes"

step "replace, and replace with a stale resourceVersion fails with Conflict"
kn get cm cm1 -o yaml >"$WORK/cm1-live.yaml"
rv=$(jp cm/cm1 '{.metadata.resourceVersion}')
sed -i 's/^  color: edited$/  color: replaced/' "$WORK/cm1-live.yaml"
out=$(kn replace -f "$WORK/cm1-live.yaml")
expect_eq "$out" "configmap/cm1 replaced" "replace"
expect_eq "$(jp cm/cm1 '{.data.color}')" "replaced" "replaced value"
[[ "$(jp cm/cm1 '{.metadata.resourceVersion}')" != "$rv" ]] || fail "replace did not change the resourceVersion"
sed -i 's/^  color: replaced$/  color: stale/' "$WORK/cm1-live.yaml"
expect_failure "replace with a stale resourceVersion" "Conflict" kn replace -f "$WORK/cm1-live.yaml"
out=$(kn replace -f "$WORK/cm1-live.yaml" 2>&1 || true)
expect_contains "$out" "the object has been modified" "conflict message"
expect_eq "$(jp cm/cm1 '{.data.color}')" "replaced" "object after the failed replace"

# ---------------------------------------------------------------------------------------
step "create configmap --from-literal"
out=$(kn create configmap lit --from-literal=k1=v1 --from-literal='k2=two words')
expect_eq "$out" "configmap/lit created" "create configmap"
expect_eq "$(jp cm/lit '{.data.k1}|{.data.k2}')" "v1|two words" "configmap data"

step "create secret generic"
out=$(kn create secret generic creds --from-literal=username=admin --from-literal=password='s3cr=t!')
expect_eq "$out" "secret/creds created" "create secret generic"
expect_eq "$(jp secret/creds '{.type}')" "Opaque" "secret type"
expect_eq "$(jp secret/creds '{.data.password}' | base64 -d)" 's3cr=t!' "secret data (base64)"
expect_eq "$(jp secret/creds '{.data.username}' | base64 -d)" 'admin' "secret data (base64)"
out=$(kn get secret creds)
expect_match "$out" '^creds +Opaque +2 +[0-9]+s$' "get secret (table)"

step "--dry-run=server creates, changes and deletes nothing"
out=$(kn create configmap dry --from-literal=a=b --dry-run=server)
expect_eq "$out" "configmap/dry created (server dry run)" "create --dry-run=server"
out=$(kn create configmap dry --from-literal=a=b --dry-run=server -o jsonpath='{.metadata.uid}')
[[ -n "$out" ]] || fail "a server dry-run create returns the object with a uid"
expect_failure "get the dry-run object" 'configmaps "dry" not found' kn get cm dry
sed 's/  a: "10"/  a: "dry"/' "$WORK/cm2.yaml" >"$WORK/cm2-dry.yaml"
out=$(k apply -f "$WORK/cm2-dry.yaml" --dry-run=server)
expect_eq "$out" "configmap/cm2 configured (server dry run)" "apply --dry-run=server"
expect_eq "$(jp cm/cm2 '{.data.a}')" "10" "data after apply --dry-run=server"
kn label cm cm2 dry=run --dry-run=server >/dev/null
expect_eq "$(jp cm/cm2 '{.metadata.labels.dry}')" "" "label after --dry-run=server"
out=$(kn delete cm cm2 --dry-run=server)
expect_eq "$out" 'configmap "cm2" deleted (server dry run)' "delete --dry-run=server"
expect_eq "$(kn get cm cm2 -o name)" "configmap/cm2" "object after delete --dry-run=server"

step "--field-selector metadata.name returns exactly the one object"
expect_eq "$(kn get cm --field-selector metadata.name=cm1 -o name)" "configmap/cm1" "field selector"
expect_eq "$(kn get cm --field-selector metadata.name!=cm1,metadata.name!=kube-root-ca.crt -o name | sort | tr '\n' ' ')" "configmap/cm2 configmap/lit " "field selector !="
out=$(kn get cm --field-selector metadata.name=nope 2>&1)
expect_contains "$out" "No resources found in $NS namespace." "field selector without a match"
expect_eq "$(k get cm -A --field-selector "metadata.name=cm1,metadata.namespace=$NS" -o name)" "configmap/cm1" "field selector across namespaces"
expect_failure "unknown field selector" "field label not supported: spec.nope" kn get cm --field-selector spec.nope=x

step "explain configmap.data"
out=$(k explain configmap.data)
expect_match "$out" '^FIELD: +data +<map\[string\]string>$' "explain"
expect_contains "$out" "Data contains the configuration data." "explain description"
out=$(k explain configmaps)
expect_match "$out" '^KIND: +ConfigMap$' "explain configmaps"
expect_contains "$out" "binaryData" "explain configmaps fields"

step "get events (a core v1 Event made with create -f)"
now=$(date -u +%Y-%m-%dT%H:%M:%SZ)
cm1_uid=$(jp cm/cm1 '{.metadata.uid}')
cat >"$WORK/event.yaml" <<EOF
apiVersion: v1
kind: Event
metadata:
  name: cm1.e2e
  namespace: $NS
involvedObject:
  apiVersion: v1
  kind: ConfigMap
  name: cm1
  namespace: $NS
  uid: $cm1_uid
reason: E2EChecked
message: checked by the kubectl e2e script
type: Normal
count: 1
firstTimestamp: "$now"
lastTimestamp: "$now"
source:
  component: kubectl-e2e
EOF
out=$(k create -f "$WORK/event.yaml")
expect_eq "$out" "event/cm1.e2e created" "create event"
out=$(kn get events)
expect_match "$out" '^LAST SEEN +TYPE +REASON +OBJECT +MESSAGE$' "get events header"
expect_match "$out" 'Normal +E2EChecked +configmap/cm1 +checked by the kubectl e2e script$' "get events row"
out=$(kn get events --field-selector involvedObject.name=cm1,reason=E2EChecked -o name)
expect_eq "$out" "event/cm1.e2e" "get events --field-selector involvedObject.name"
out=$(kn get events -o wide)
expect_contains "$out" "kubectl-e2e" "get events -o wide (source column)"
out=$(kn describe configmap cm1)
expect_match "$out" "^Namespace: +$NS\$" "describe"
expect_match "$out" '^  Normal +E2EChecked +[0-9]+s +kubectl-e2e +checked by the kubectl e2e script$' "describe lists the event"
out=$(kn get cm cm1 -o custom-columns=NAME:.metadata.name,COLOR:.data.color,TIER:.metadata.labels.tier --no-headers)
expect_match "$out" '^cm1 +replaced +web$' "get -o custom-columns"

# ---------------------------------------------------------------------------------------
step "get -w sees an added and a changed object"
"$KUBECTL" -n "$NS" get cm -w --request-timeout=60s >"$WORK/watch.out" 2>&1 &
BG_PIDS+=($!)
watch_pid=$!
wait_until 20 "get -w printed the initial list" grep -q '^cm1 ' "$WORK/watch.out"
kn create configmap watched --from-literal=x=1 >/dev/null
wait_until 20 "get -w printed the added object" grep -qE '^watched +1 ' "$WORK/watch.out"
kn patch cm watched --type merge -p '{"data":{"y":"2"}}' >/dev/null
wait_until 20 "get -w printed the changed object" grep -qE '^watched +2 ' "$WORK/watch.out"
kill "$watch_pid" 2>/dev/null || true
wait "$watch_pid" 2>/dev/null || true
"$KUBECTL" -n "$NS" get cm watched -w --output-watch-events >"$WORK/watch2.out" 2>&1 &
BG_PIDS+=($!)
watch_pid=$!
wait_until 20 "get -w --output-watch-events printed the initial object" grep -qE '^ADDED +watched ' "$WORK/watch2.out"
kn label cm watched seen=yes >/dev/null
wait_until 20 "get -w --output-watch-events printed MODIFIED" grep -qE '^MODIFIED +watched ' "$WORK/watch2.out"
kn delete cm watched --wait=false >/dev/null
wait_until 20 "get -w --output-watch-events printed DELETED" grep -qE '^DELETED +watched ' "$WORK/watch2.out"
kill "$watch_pid" 2>/dev/null || true
wait "$watch_pid" 2>/dev/null || true
if grep -qiE 'BOOKMARK|error' "$WORK/watch.out" "$WORK/watch2.out"; then
	fail "get -w printed a bookmark or an error:"$'\n'"$(cat "$WORK/watch.out" "$WORK/watch2.out")"
fi

step "delete --wait with each --cascade removes the object"
for c in background foreground orphan; do
	kn create configmap "del-$c" --from-literal=x=y >/dev/null
	out=$(kn delete configmap "del-$c" --cascade="$c" --wait=true --timeout=60s)
	expect_eq "$out" "configmap \"del-$c\" deleted" "delete --cascade=$c"
	gone "cm/del-$c" || fail "configmap del-$c still exists after delete --cascade=$c"
done
expect_failure "delete a missing object" 'configmaps "del-orphan" not found' kn delete cm del-orphan
out=$(kn delete cm del-orphan --ignore-not-found)
expect_eq "$out" "" "delete --ignore-not-found"

step "wait --for=delete returns once the finalizer is removed"
cat >"$WORK/held.yaml" <<EOF
apiVersion: v1
kind: ConfigMap
metadata:
  name: held
  namespace: $NS
  finalizers:
  - e2e.kubeos.dev/hold
data:
  x: held
EOF
k create -f "$WORK/held.yaml" >/dev/null
out=$(kn delete cm held --wait=false)
expect_eq "$out" 'configmap "held" deleted' "delete with a finalizer"
ts=$(jp cm/held '{.metadata.deletionTimestamp}')
[[ -n "$ts" ]] || fail "the held object has no deletionTimestamp"
expect_failure "delete --wait times out while a finalizer holds the object" "timed out" kn delete cm held --timeout=2s
"$KUBECTL" -n "$NS" wait --for=delete cm/held --timeout=60s >"$WORK/wait.out" 2>&1 &
BG_PIDS+=($!)
wait_pid=$!
sleep 2
kill -0 "$wait_pid" 2>/dev/null || fail "wait --for=delete returned while the finalizer was still there:"$'\n'"$(cat "$WORK/wait.out")"
kn patch cm held --type json -p '[{"op":"remove","path":"/metadata/finalizers"}]' >/dev/null
if ! wait "$wait_pid"; then
	fail "wait --for=delete failed:"$'\n'"$(cat "$WORK/wait.out")"
fi
expect_contains "$(cat "$WORK/wait.out")" "configmap/held condition met" "wait --for=delete output"
gone cm/held || fail "the held configmap still exists"

# ---------------------------------------------------------------------------------------
step "--chunk-size=100 pages over 1,000 configmaps"
{
	echo '{"apiVersion":"v1","kind":"List","items":['
	for i in $(seq -w 1 1000); do
		[[ $i == 0001 ]] || echo ','
		printf '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"bulk-%s","namespace":"%s","labels":{"bulk":"true"}},"data":{"i":"%s"}}' "$i" "$NS" "$i"
	done
	echo ']}'
} >"$WORK/bulk.json"
out=$(k create -f "$WORK/bulk.json" | wc -l)
expect_eq "$out" "1000" "create -f of a List of 1,000 configmaps"
kn get cm -l bulk=true --chunk-size=100 --no-headers -v=6 >"$WORK/chunk.out" 2>"$WORK/chunk.log"
expect_eq "$(wc -l <"$WORK/chunk.out")" "1000" "rows of get --chunk-size=100"
expect_eq "$(awk '{print $1}' "$WORK/chunk.out" | sort -u | wc -l)" "1000" "distinct names of get --chunk-size=100"
expect_eq "$(awk 'NR==1{print $1} END{print $1}' "$WORK/chunk.out" | tr '\n' ' ')" "bulk-0001 bulk-1000 " "first and last rows"
# -v=6 logs each request: "GET https://…?limit=100 200 OK in 3 milliseconds" (1.27) or
# "Response" verb="GET" url="https://…?limit=100" status="200 OK" (1.33).
requests=$(grep -E '/configmaps\?[^ "]*limit=100' "$WORK/chunk.log" | grep -F '200 OK' || true)
pages=$(grep -c . <<<"$requests" || true)
conts=$(grep -c 'continue=' <<<"$requests" || true)
# Ten full pages; kube-apiserver may end with an empty eleventh page when objects the label
# selector skips follow the last match.
((pages == 10 || pages == 11)) || fail "list requests with limit=100: got $pages, want 10 (or 11)"
expect_eq "$conts" "$((pages - 1))" "list requests with a continue token"
expect_eq "$(kn get cm -l bulk=true --chunk-size=100 -o name | wc -l)" "1000" "get --chunk-size=100 -o name"
expect_eq "$(kn get cm -l bulk=true --chunk-size=0 -o name | wc -l)" "1000" "get --chunk-size=0 (one request)"

# ---------------------------------------------------------------------------------------
step "delete namespace: Terminating, its content goes, then the namespace"
sed -e 's/name: held/name: ns-held/' "$WORK/held.yaml" | k create -f - >/dev/null
out=$(k delete namespace "$NS" --wait=false)
expect_eq "$out" "namespace \"$NS\" deleted" "delete namespace"
expect_eq "$(k get namespace "$NS" -o jsonpath='{.status.phase}')" "Terminating" "namespace phase after delete"
[[ -n "$(k get namespace "$NS" -o jsonpath='{.metadata.deletionTimestamp}')" ]] || fail "the namespace has no deletionTimestamp"
expect_failure "create in a terminating namespace" "because it is being terminated" kn create configmap late --from-literal=a=b
only_held() { [[ "$(kn get cm,secrets,serviceaccounts,events -o name)" == "configmap/ns-held" ]]; }
wait_until 120 "the namespace controller deleted the content (all but the held configmap)" only_held
ts=$(jp cm/ns-held '{.metadata.deletionTimestamp}')
[[ -n "$ts" ]] || fail "the held configmap was not deleted"
cond='{.status.conditions[?(@.type=="NamespaceFinalizersRemaining")].status}'
fins_remaining() { [[ "$(k get namespace "$NS" -o "jsonpath=$cond")" == "True" ]]; }
wait_until 30 "the namespace reports NamespaceFinalizersRemaining=True" fins_remaining
expect_eq "$(k get namespace "$NS" -o jsonpath='{.status.phase}')" "Terminating" "namespace phase while content remains"
kn patch cm ns-held --type merge -p '{"metadata":{"finalizers":null}}' >/dev/null
out=$(k wait --for=delete "namespace/$NS" --timeout=60s 2>&1) || fail "the namespace was not deleted: $out"$'\n'"$(k get namespace "$NS" -o yaml 2>&1)"
expect_failure "get the deleted namespace" "not found" k get namespace "$NS"

STEP="done"
echo "PASS: kubectl $version"
