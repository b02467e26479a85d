package platform

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
)

// resolveRevisionEnv turns the ${resources.<as>.<key>} placeholders of a revision's env
// (what the canary runs before the Component has the revision) into $(<AS>_<KEY>)
// references, as the Component's builder does with spec.env (buildComponentEnv): the
// kubelet expands them from the variables the Component injects from its uses' connection
// Secrets, so no secret value lands in the canary's pod spec. defined is the stable
// container's env; a placeholder naming a variable it does not define is an error (the
// Component has no such use, or its connection no such key), as it would be for the
// Component once promoted.
func resolveRevisionEnv(env, defined []corev1.EnvVar) ([]corev1.EnvVar, error) {
	if len(env) == 0 {
		return env, nil
	}
	out := make([]corev1.EnvVar, len(env))
	for i, e := range env {
		e = *e.DeepCopy()
		phs, err := parseComponentPlaceholders(e.Value)
		if err != nil {
			return nil, fmt.Errorf("env %s: %w", e.Name, err)
		}
		for _, p := range phs {
			v := InjectedEnvName(p.As, p.Key)
			if !slices.ContainsFunc(defined, func(d corev1.EnvVar) bool { return d.Name == v }) {
				return nil, fmt.Errorf("env %s: ${resources.%s.%s}: the Component injects no %s (no data use %q with key %q)", e.Name, p.As, p.Key, v, p.As, p.Key)
			}
		}
		e.Value = componentPlaceholderRE.ReplaceAllStringFunc(e.Value, func(m string) string {
			s := componentPlaceholderRE.FindStringSubmatch(m)
			return "$(" + InjectedEnvName(s[1], s[3]) + ")"
		})
		out[i] = e
	}
	return out, nil
}
