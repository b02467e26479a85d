// Package crdload holds what the CRD benchmarks (bench/crdbench, bench/crdmem) create: the
// Database CRD of the example, one distinct group per index.
package crdload

import (
	"fmt"
	"sync"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

// template is the Database CRD parsed once; DatabaseCRD copies it and sets the group, so the
// clients' CPU goes to the requests rather than to parsing YAML (the clients share the
// machine with the servers they measure).
var template = sync.OnceValues(func() (*apiextensionsv1.CustomResourceDefinition, error) {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	return crd, yaml.Unmarshal([]byte(databaseTemplate), crd)
})

// DatabaseCRD is CRD number i of a run: the Database schema (an enum, bounds, a pattern,
// defaults, a CEL rule, status and scale, printer columns) in group g<i>.<run>.bench.example.com.
func DatabaseCRD(i int, run string) (*apiextensionsv1.CustomResourceDefinition, error) {
	t, err := template()
	if err != nil {
		return nil, err
	}
	crd := t.DeepCopy()
	crd.Spec.Group = fmt.Sprintf("g%d.%s.bench.example.com", i, run)
	crd.Name = crd.Spec.Names.Plural + "." + crd.Spec.Group
	return crd, nil
}

const databaseTemplate = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
spec:
  scope: Namespaced
  names: {plural: databases, singular: database, kind: Database, shortNames: [db]}
  versions:
  - name: v1
    served: true
    storage: true
    subresources:
      status: {}
      scale: {specReplicasPath: .spec.replicas, statusReplicasPath: .status.readyReplicas}
    additionalPrinterColumns:
    - {name: Engine, type: string, jsonPath: .spec.engine}
    - {name: Replicas, type: integer, jsonPath: .spec.replicas}
    - {name: Age, type: date, jsonPath: .metadata.creationTimestamp}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            required: [engine, replicas]
            x-kubernetes-validations:
            - {rule: "!has(self.backup) || !self.backup.enabled || has(self.backup.schedule)", message: "schedule required"}
            properties:
              engine: {type: string, enum: [postgresql, mysql]}
              replicas: {type: integer, minimum: 1, maximum: 7}
              storageSize: {type: string, pattern: "^[0-9]+(Gi|Ti)$", default: 10Gi}
              backup:
                type: object
                properties:
                  enabled: {type: boolean, default: false}
                  schedule: {type: string}
          status:
            type: object
            properties:
              phase: {type: string}
              readyReplicas: {type: integer}
`
