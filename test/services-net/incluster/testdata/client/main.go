// Command client is the pod of TestInClusterConfig: what an operator does first when it
// runs in a pod. It takes client-go's in-cluster configuration (rest.InClusterConfig: the
// KUBERNETES_SERVICE_HOST/PORT the node gives every pod, the service account's token and
// CA), lists the pods of its namespace and gets its default ServiceAccount, prints what it
// found and exits 0; any error is printed and exits 1.
package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

func main() {
	if err := run(); err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
}

func run() error {
	cfg, err := rest.InClusterConfig()
	if err != nil {
		return err
	}
	cfg.Timeout = 30 * time.Second
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	b, err := os.ReadFile("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
	if err != nil {
		return err
	}
	ns := strings.TrimSpace(string(b))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list pods: %w", err)
	}
	var names []string
	for _, p := range pods.Items {
		names = append(names, p.Name)
	}
	sa, err := cs.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("get serviceaccount: %w", err)
	}
	fmt.Printf("host %s\npods %s\nserviceaccount %s uid %s\n", cfg.Host, strings.Join(names, ","), sa.Name, sa.UID)
	return nil
}
