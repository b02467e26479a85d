// Package crdload holds what the CRD benchmarks (bench/crdbench, bench/crdmem) create: the
// Database CRD of the example, one distinct group per index.
package crdload

import (
	"fmt"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

// DatabaseCRD is CRD number i of a run: the Database schema (an enum, bounds, a pattern,
// defaults, a CEL rule, status and scale, printer columns) in group g<i>.<run>.bench.example.com.
func DatabaseCRD(i int, run string) (*apiextensionsv1.CustomResourceDefinition, error) {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.Unmarshal(fmt.Appendf(nil, databaseTemplate, i, run), crd); err != nil {
		return nil, err
	}
	return crd, nil
}

const databaseTemplate = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: databases.g%[1]d.%[2]s.bench.example.com}
spec:
  group: g%[1]d.%[2]s.bench.example.com
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
