package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// loadResult counts how the load's requests were answered.
type loadResult struct {
	OK, R429, Other, NotSent, Offered int64
}

// loadCommand asks the load process for one phase: a closed loop of Workers for Phase
// (Rate 0), or Rate requests a second open-loop for Phase.
type loadCommand struct {
	Phase   time.Duration
	Workers int
	Rate    float64
}

func count(code int, err error, ok, r429, other *atomic.Int64) {
	switch {
	case err == nil && code < 300:
		ok.Add(1)
	case err == nil && code == http.StatusTooManyRequests:
		r429.Add(1)
	default:
		other.Add(1)
	}
}

// closedLoop runs workers that each send the mixed load one request after another.
func closedLoop(ctx context.Context, t target, workers int) loadResult {
	var ok, r429, other, seq atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for ctx.Err() == nil {
				code, err := mixed(ctx, t, int(seq.Add(1)))
				if ctx.Err() != nil {
					return
				}
				count(code, err, &ok, &r429, &other)
			}
		})
	}
	wg.Wait()
	return loadResult{OK: ok.Load(), R429: r429.Load(), Other: other.Load(), Offered: seq.Load()}
}

// openLoop offers rate requests a second whatever the answers, with at most maxInFlight in
// flight (an offered request beyond them is counted as not sent).
func openLoop(ctx context.Context, t target, rate float64, maxInFlight int) loadResult {
	var ok, r429, other, notSent, offered atomic.Int64
	var wg sync.WaitGroup
	sem := make(chan struct{}, maxInFlight)
	interval := time.Duration(float64(time.Second) / rate)
	start := time.Now()
	for i := 0; ctx.Err() == nil; i++ {
		if d := time.Until(start.Add(time.Duration(i) * interval)); d > 0 {
			time.Sleep(d)
		}
		offered.Add(1)
		select {
		case sem <- struct{}{}:
		default:
			notSent.Add(1)
			continue
		}
		wg.Go(func() {
			defer func() { <-sem }()
			code, err := mixed(ctx, t, i)
			if ctx.Err() != nil {
				return
			}
			count(code, err, &ok, &r429, &other)
		})
	}
	wg.Wait()
	return loadResult{OK: ok.Load(), R429: r429.Load(), Other: other.Load(), NotSent: notSent.Load(), Offered: offered.Load()}
}

// runLoad runs one command against t.
func runLoad(ctx context.Context, t target, c loadCommand, maxInFlight int) loadResult {
	ctx, cancel := context.WithTimeout(ctx, c.Phase)
	defer cancel()
	if c.Rate == 0 {
		return closedLoop(ctx, t, c.Workers)
	}
	return openLoop(ctx, t, c.Rate, maxInFlight)
}

// serveLoad is the load process (-load-process): it reads loadCommands as JSON lines on
// stdin and answers each with a loadResult line on stdout, until stdin ends.
func serveLoad(ctx context.Context, t target, maxInFlight int, in io.Reader, out io.Writer) error {
	sc := bufio.NewScanner(in)
	enc := json.NewEncoder(out)
	if _, err := fmt.Fprintln(out, "ready"); err != nil {
		return err
	}
	for sc.Scan() {
		var c loadCommand
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			return err
		}
		if err := enc.Encode(runLoad(ctx, t, c, maxInFlight)); err != nil {
			return err
		}
	}
	return sc.Err()
}

// loadProcess is a child process running the load, so that the probes' latency is not
// the load generator's own scheduling delay (thousands of goroutines, TLS handshakes of
// the connections client-go dials when the server's stream limit is reached): separate
// clients are separate processes.
type loadProcess struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Scanner
}

func startLoadProcess(kubeconfig string, maxInFlight int) (*loadProcess, error) {
	cmd := exec.Command(os.Args[0], "-load-process", "-kubeconfig", kubeconfig, "-max-inflight", strconv.Itoa(maxInFlight))
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &loadProcess{cmd: cmd, in: in, out: bufio.NewScanner(out)}
	if !p.out.Scan() || p.out.Text() != "ready" { // its client is set up
		_ = p.stop()
		return nil, fmt.Errorf("load process did not start: %v", p.out.Err())
	}
	return p, nil
}

func (p *loadProcess) run(c loadCommand) (loadResult, error) {
	b, _ := json.Marshal(c)
	if _, err := p.in.Write(append(b, '\n')); err != nil {
		return loadResult{}, err
	}
	if !p.out.Scan() {
		return loadResult{}, fmt.Errorf("load process: %v", p.out.Err())
	}
	var r loadResult
	return r, json.Unmarshal(p.out.Bytes(), &r)
}

func (p *loadProcess) stop() error {
	p.in.Close()
	return p.cmd.Wait()
}
