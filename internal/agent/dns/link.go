package dns

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

func ipCmd(ctx context.Context, args ...string) error {
	cmd := exec.CommandContext(ctx, "ip", args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(out.String()))
	}
	return nil
}

// EnsureAddress makes link (a dummy interface; an empty bridge when the kernel has no
// dummy driver — either only holds addresses) exist and be up, with addr as a /32 (/128)
// on it. Already so is no error.
func EnsureAddress(ctx context.Context, link string, addr netip.Addr) error {
	if ipCmd(ctx, "link", "show", "dev", link) != nil {
		if err := ipCmd(ctx, "link", "add", link, "type", "dummy"); err != nil {
			if err2 := ipCmd(ctx, "link", "add", link, "type", "bridge"); err2 != nil {
				return fmt.Errorf("dns: interface %s: %w; %w", link, err, err2)
			}
		}
	}
	if addr.Is4() {
		// No IPv6 link-local address on it: the link holds the DNS address only.
		_ = os.WriteFile(filepath.Join("/proc/sys/net/ipv6/conf", link, "disable_ipv6"), []byte("1"), 0o644)
	}
	if err := ipCmd(ctx, "link", "set", "dev", link, "up"); err != nil {
		return fmt.Errorf("dns: interface %s: %w", link, err)
	}
	if err := ipCmd(ctx, "addr", "replace", netip.PrefixFrom(addr, addr.BitLen()).String(), "dev", link); err != nil {
		return fmt.Errorf("dns: address %s on %s: %w", addr, link, err)
	}
	return nil
}

// RemoveAddress takes addr off link (absent is no error).
func RemoveAddress(ctx context.Context, link string, addr netip.Addr) {
	_ = ipCmd(ctx, "addr", "del", netip.PrefixFrom(addr, addr.BitLen()).String(), "dev", link)
}

// RemoveLink deletes link and so its addresses (absent is no error): for `kube agent
// --cleanup` and tests.
func RemoveLink(ctx context.Context, link string) { _ = ipCmd(ctx, "link", "del", link) }
