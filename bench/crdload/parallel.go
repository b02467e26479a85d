package crdload

import (
	"sync"
	"sync/atomic"
)

// Parallel calls do(i) for every i in [0, n), spread over `clients` goroutines taking the
// next index as they go (so a slow call does not hold back the others), and waits. It counts
// the calls that failed and returns the first error.
func Parallel(n, clients int, do func(i int) error) (failed int64, first error) {
	var next, fails atomic.Int64
	var once sync.Once
	var wg sync.WaitGroup
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				if err := do(i); err != nil {
					fails.Add(1)
					once.Do(func() { first = err })
				}
			}
		}()
	}
	wg.Wait()
	return fails.Load(), first
}
