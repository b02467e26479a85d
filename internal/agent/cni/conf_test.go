package cni

import (
	"encoding/json"
	"fmt"
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
	// Routes: the cluster and Service CIDRs and the node through the gateway; the pod CIDR
	// itself (on-link), duplicates and IPv6 left out; never a default route.
	n.Routes = []netip.Prefix{netip.MustParsePrefix("10.234.0.0/16"), netip.MustParsePrefix("10.96.0.0/12"),
		netip.MustParsePrefix("192.168.1.7/32"), netip.MustParsePrefix("10.234.5.0/24"), netip.MustParsePrefix("10.96.0.0/12"), netip.MustParsePrefix("fd00::/64")}
	b, err = ConfList(n)
	if err != nil {
		t.Fatal(err)
	}
	var withRoutes struct {
		Plugins []struct {
			IPAM struct {
				Routes []map[string]string `json:"routes"`
			} `json:"ipam"`
		} `json:"plugins"`
	}
	if err := json.Unmarshal(b, &withRoutes); err != nil {
		t.Fatal(err)
	}
	got := withRoutes.Plugins[0].IPAM.Routes
	want := []map[string]string{{"dst": "10.234.0.0/16", "gw": "10.234.5.1"}, {"dst": "10.96.0.0/12", "gw": "10.234.5.1"}, {"dst": "192.168.1.7/32", "gw": "10.234.5.1"}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("routes %v, want %v", got, want)
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
