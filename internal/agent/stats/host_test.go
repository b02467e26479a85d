package stats

import (
	"testing"
	"time"
)

func TestParseProcStat(t *testing.T) {
	got, err := parseProcStat([]byte("cpu  100 20 30 5000 7 1 2 3 0 0\ncpu0 1 2 3 4 5 6 7 8 0 0\n"))
	// busy: user 100 + nice 20 + system 30 + irq 1 + softirq 2 + steal 3 = 156 ticks.
	if err != nil || got != 156*uint64(10*time.Millisecond) {
		t.Errorf("parseProcStat = %d, %v", got, err)
	}
	if _, err := parseProcStat([]byte("intr 1 2 3\n")); err == nil {
		t.Error("parseProcStat accepted a file without a cpu line")
	}
}

func TestParseMeminfo(t *testing.T) {
	m, err := parseMeminfo([]byte("MemTotal:       1000 kB\nMemFree:         200 kB\nInactive(file):  300 kB\n"))
	if err != nil {
		t.Fatal(err)
	}
	if m.usage != 800*1024 || m.workingSet != 500*1024 || m.available != 500*1024 {
		t.Errorf("parseMeminfo = %+v", m)
	}
	if _, err := parseMeminfo([]byte("MemFree: 1 kB\n")); err == nil {
		t.Error("parseMeminfo accepted a file without MemTotal")
	}
}

func TestParseNetDev(t *testing.T) {
	b := []byte(`Inter-|   Receive                                                |  Transmit
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed
    lo:     100       1    0    0    0     0          0         0      100       1    0    0    0     0       0          0
  eth0:    5000      10    2    0    0     0          0         0     7000      12    3    0    0     0       0          0
`)
	ifs := parseNetDev(b)
	if len(ifs) != 2 || ifs[1].Name != "eth0" || *ifs[1].RxBytes != 5000 || *ifs[1].RxErrors != 2 || *ifs[1].TxBytes != 7000 || *ifs[1].TxErrors != 3 {
		t.Errorf("parseNetDev = %+v", ifs)
	}
}

func TestParseProcCgroup(t *testing.T) {
	v1 := parseProcCgroup("12:memory:/k8s.io/abc\n4:cpu,cpuacct:/k8s.io/abc\n0::/\n")
	if v1["memory"] != "/k8s.io/abc" || v1["cpuacct"] != "/k8s.io/abc" || v1["cpu"] != "/k8s.io/abc" {
		t.Errorf("v1: %v", v1)
	}
	v2 := parseProcCgroup("0::/kubepods/pod1/abc\n")
	if len(v2) != 1 || v2[""] != "/kubepods/pod1/abc" {
		t.Errorf("v2: %v", v2)
	}
	if got := statField("usage_usec 1500\nuser_usec 1000\n", "usage_usec"); got != 1500 {
		t.Errorf("statField = %d", got)
	}
}

func TestNanoCores(t *testing.T) {
	t0 := time.Unix(100, 0)
	for _, tc := range []struct {
		name      string
		prev, cur sample
		want      *uint64
	}{
		{"half a core", sample{t0, 1e9}, sample{t0.Add(2 * time.Second), 2e9}, ptrU(5e8)},
		{"same time", sample{t0, 1e9}, sample{t0, 2e9}, nil},
		{"counter reset", sample{t0, 2e9}, sample{t0.Add(time.Second), 1e9}, nil},
	} {
		got := nanoCores(tc.prev, tc.cur)
		if (got == nil) != (tc.want == nil) || got != nil && *got != *tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
