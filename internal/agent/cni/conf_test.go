package cni

import (
	"encoding/json"
	"net/netip"
	"strings"
	"testing"
)

func TestConfList(t *testing.T) {
	n := Network{Name: "kube", Bridge: "kube0", PodCIDR: netip.MustParsePrefix("10.234.5.0/24"), IPAMDir: "/d/ipam"}
	b, err := ConfList(n)
	if err != nil {
		t.Fatal(err)
	}
	var conf struct {
		Plugins []map[string]any `json:"plugins"`
	}
	if err := json.Unmarshal(b, &conf); err != nil {
		t.Fatal(err)
	}
	br := conf.Plugins[0]
	if br["type"] != "bridge" || br["isGateway"] != true || br["ipMasq"] != false || br["bridge"] != "kube0" {
		t.Errorf("bridge plugin %v", br)
	}
	if !strings.Contains(string(b), `"gateway": "10.234.5.1"`) || !strings.Contains(string(b), `"routes": []`) {
		t.Errorf("gateway or routes wrong:\n%s", b)
	}
	if conf.Plugins[1]["type"] != "portmap" {
		t.Errorf("no portmap: %v", conf.Plugins)
	}
	for _, bad := range []Network{
		{Bridge: "", PodCIDR: n.PodCIDR},
		{Bridge: "a-very-long-bridge-name", PodCIDR: n.PodCIDR},
		{Bridge: "b", PodCIDR: netip.MustParsePrefix("10.0.0.0/31")},
		{Bridge: "b", PodCIDR: netip.MustParsePrefix("fd00::/64")},
	} {
		if _, err := ConfList(bad); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}
