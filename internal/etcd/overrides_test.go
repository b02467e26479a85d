package etcd

import (
	"reflect"
	"strings"
	"testing"
)

func TestParseServersOverrides(t *testing.T) {
	const upstream = "--etcd-servers-overrides invalid, must be of format: group/resource#servers, where servers are URLs, semicolon separated"
	tests := []struct {
		name    string
		in      []string
		want    []ServersOverride
		wantErr string // beside upstream's message, which every error starts with
	}{
		{name: "none", in: nil, want: nil},
		{name: "core events", in: []string{"/events#http://127.0.0.1:2479"},
			want: []ServersOverride{{Group: "", Resource: "events", Servers: []string{"http://127.0.0.1:2479"}}}},
		{name: "upstream's help example", in: []string{"/pods#http://etcd4:2379;http://etcd5:2379", "/events#http://etcd6:2379"},
			want: []ServersOverride{
				{Resource: "pods", Servers: []string{"http://etcd4:2379", "http://etcd5:2379"}},
				{Resource: "events", Servers: []string{"http://etcd6:2379"}},
			}},
		{name: "group and https", in: []string{"apps/deployments#https://a:2379;https://b:2379/"},
			want: []ServersOverride{{Group: "apps", Resource: "deployments", Servers: []string{"https://a:2379", "https://b:2379/"}}}},
		{name: "unix socket", in: []string{"coordination.k8s.io/leases#unix:///run/etcd/client.sock"},
			want: []ServersOverride{{Group: "coordination.k8s.io", Resource: "leases", Servers: []string{"unix:///run/etcd/client.sock"}}}},
		// kube-apiserver's own test case: no '#'.
		{name: "no hash", in: []string{"/events/http://127.0.0.1:4002"}, wantErr: "exactly one '#'"},
		{name: "two hashes", in: []string{"/events#http://a:2379#x"}, wantErr: "exactly one '#'"},
		{name: "no slash", in: []string{"events#http://a:2379"}, wantErr: "exactly one '/'"},
		{name: "two slashes", in: []string{"apps/v1/deployments#http://a:2379"}, wantErr: "exactly one '/'"},
		{name: "empty servers", in: []string{"/events#"}, wantErr: "empty server"},
		{name: "empty server between", in: []string{"/events#http://a:2379;;http://b:2379"}, wantErr: "empty server"},
		{name: "trailing semicolon", in: []string{"/events#http://a:2379;"}, wantErr: "empty server"},
		{name: "empty entry", in: []string{""}, wantErr: "exactly one '#'"},
		{name: "no resource", in: []string{"apps/#http://a:2379"}, wantErr: "no resource"},
		{name: "upper-case resource", in: []string{"/Events#http://a:2379"}, wantErr: `resource "Events"`},
		{name: "space in group", in: []string{" apps/deployments#http://a:2379"}, wantErr: `group " apps"`},
		{name: "no scheme", in: []string{"/events#127.0.0.1:2379"}, wantErr: `server "127.0.0.1:2379"`},
		{name: "bare host", in: []string{"/events#etcd6"}, wantErr: "not an http, https, unix or unixs URL"},
		{name: "ftp", in: []string{"/events#ftp://a:2379"}, wantErr: "not an http, https, unix or unixs URL"},
		{name: "no host", in: []string{"/events#http://"}, wantErr: "no host"},
		{name: "path", in: []string{"/events#http://a:2379/v3"}, wantErr: "no path"},
		{name: "twice", in: []string{"/events#http://a:2379", "/events#http://b:2379"}, wantErr: "resource /events is given twice"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseServersOverrides(tt.in)
			if tt.wantErr != "" {
				if err == nil {
					t.Fatalf("no error; got %+v", got)
				}
				if !strings.HasPrefix(err.Error(), upstream) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %q, want upstream's message and %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestSameServers(t *testing.T) {
	tests := []struct {
		a, b []string
		want bool
	}{
		{[]string{"http://a:1", "http://b:1"}, []string{"http://b:1", "http://a:1"}, true},
		{[]string{"http://a:1"}, []string{"http://a:1", "http://b:1"}, false},
		{[]string{"http://a:1", "http://a:1"}, []string{"http://a:1"}, true},
		{nil, []string{"http://a:1"}, false},
	}
	for _, tt := range tests {
		if got := SameServers(tt.a, tt.b); got != tt.want {
			t.Errorf("SameServers(%v, %v) = %v, want %v", tt.a, tt.b, got, tt.want)
		}
	}
}
