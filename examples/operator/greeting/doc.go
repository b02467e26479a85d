// Package greeting is the example operator: the Greeting kind (examples/operator/api) run by
// the lifecycle engine (pkg/lifecycle) outside kube server, with the generated kubeos.dev
// clients (pkg/client) to wait for a built-in Credential.
//
// Job: for each Greeting, once the Credential it names is Active, write the ConfigMap
// <name>-greeting holding the rendered text ("<message>, <to>!") and the Credential's Secret
// name; re-render on spec changes; delete it when the Greeting goes. The engine does the rest
// (finalizer, conditions, phase through Greeting's transition table, retries).
//
// Contract: Run installs the CRD, starts a shared informer on Credentials from the generated
// informer factory, registers the kind with a fresh lifecycle.Engine and runs it under a
// controller-runtime manager until ctx ends. It needs rights to CRDs (create/update),
// greetings (all), configmaps (all) and credentials (get/list/watch).
//
// A dependency on a kind managed by another process (the server's Credential) cannot be
// declared through KindOptions.Dependencies: the engine knows only the phases of kinds
// registered with it, so the driver gates on the Credential itself (CredentialGate, through
// the generated lister) and looks again every Options.Poll while it waits.
package greeting
