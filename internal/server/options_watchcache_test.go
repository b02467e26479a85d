package server

import (
	"strings"
	"testing"
)

// TestWatchCacheSizes: the watch cache grows from --watch-cache-size to --watch-cache-max-size
// (102,400 by default, kube-apiserver's); a maximum below the minimum is refused by name.
func TestWatchCacheSizes(t *testing.T) {
	for _, tc := range []struct {
		size, max int
		wantMax   int
		err       string
	}{
		{0, 0, 100 * 1024, ""},
		{1000, 1000, 1000, ""},
		{2000, 0, 100 * 1024, ""},
		{1000, 500, 0, "--watch-cache-max-size 500 is less than --watch-cache-size 1000"},
		{1000, -1, 0, "--watch-cache-max-size -1 is less than"},
		{5, 5, 0, "--watch-cache-size 5 is too small"},
	} {
		o := &Options{WatchCacheSize: tc.size, WatchCacheMaxSize: tc.max}
		o.Complete()
		err := o.Validate()
		if tc.err == "" {
			if err != nil || o.WatchCacheMaxSize != tc.wantMax {
				t.Errorf("size %d, max %d: max %d, %v; want max %d", tc.size, tc.max, o.WatchCacheMaxSize, err, tc.wantMax)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("size %d, max %d: %v, want an error containing %q", tc.size, tc.max, err, tc.err)
		}
	}
}
