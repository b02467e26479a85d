package nodeipam

import (
	"fmt"
	"testing"
)

func TestParseConfig(t *testing.T) {
	for _, tc := range []struct {
		cidr               string
		mask, mask4, mask6 int
		want               string // "cidrs masks" or "error"
	}{
		{DefaultClusterCIDR, 0, 0, 0, "[10.244.0.0/16] [24]"},
		{"10.0.0.0/8", 16, 0, 0, "[10.0.0.0/8] [16]"},
		{"10.244.0.0/16", 0, 26, 0, "[10.244.0.0/16] [26]"},
		{"fd00::/48", 0, 0, 0, "[fd00::/48] [64]"},
		{"10.244.0.0/16,fd00::/48", 0, 0, 0, "[10.244.0.0/16 fd00::/48] [24 64]"},
		{"10.244.0.0/16,fd00::/48", 0, 25, 60, "[10.244.0.0/16 fd00::/48] [25 60]"},
		{"10.244.0.0/16,fd00::/48", 24, 0, 0, "error"},
		{"10.244.0.0/16,10.245.0.0/16", 0, 0, 0, "error"},
		{"10.244.0.0/16", 24, 24, 0, "error"},
		{"10.244.0.0/16", 8, 0, 0, "error"},
		{"10.0.0.0/8", 28, 0, 0, "error"},
		{"nope", 0, 0, 0, "error"},
	} {
		cfg, err := ParseConfig(tc.cidr, tc.mask, tc.mask4, tc.mask6)
		got := "error"
		if err == nil {
			got = fmt.Sprint(cfg.ClusterCIDRs, " ", cfg.MaskSizes)
		}
		if got != tc.want {
			t.Errorf("ParseConfig(%q, %d, %d, %d) = %s (%v), want %s", tc.cidr, tc.mask, tc.mask4, tc.mask6, got, err, tc.want)
		}
	}
}
