// Command coldstart starts a server command, polls its /readyz until it answers 200 and
// reports the time that took, then waits a few seconds idle and reports the process's RSS.
// Usage: coldstart -url https://127.0.0.1:6443/readyz [-insecure] -- cmd args...
package main

import (
	"crypto/tls"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	url := flag.String("url", "https://127.0.0.1:6443/readyz", "readiness URL (anonymous GET must answer 200 when ready)")
	idle := flag.Duration("idle", 5*time.Second, "idle time before reading RSS")
	name := flag.String("name", "", "label")
	flag.Parse()
	args := flag.Args()
	if len(args) == 0 {
		fmt.Fprintln(os.Stderr, "usage: coldstart [flags] -- command args...")
		os.Exit(2)
	}
	client := &http.Client{Timeout: time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	start := time.Now()
	cmd := exec.Command(args[0], args[1:]...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		cmd.Wait()
	}()
	var ready time.Duration
	for {
		resp, err := client.Get(*url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				ready = time.Since(start)
				break
			}
		}
		if time.Since(start) > 2*time.Minute {
			fmt.Fprintln(os.Stderr, "not ready within 2 minutes")
			os.Exit(1)
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(*idle)
	rss := rssOfTree(cmd.Process.Pid)
	out, _ := json.Marshal(map[string]any{"target": *name, "ready_s": ready.Seconds(), "idle_rss_mb": float64(rss) / 1024})
	fmt.Println(string(out))
}

// rssOfTree sums VmRSS (kB) of pid and its descendants.
func rssOfTree(pid int) int {
	total := 0
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err == nil {
		for _, line := range strings.Split(string(status), "\n") {
			if strings.HasPrefix(line, "VmRSS:") {
				f := strings.Fields(line)
				n, _ := strconv.Atoi(f[1])
				total += n
			}
		}
	}
	children, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
	for _, c := range strings.Fields(string(children)) {
		n, _ := strconv.Atoi(c)
		total += rssOfTree(n)
	}
	return total
}
