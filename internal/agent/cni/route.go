package cni

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"os/exec"
	"strings"
)

// unreachableMetric keeps the unreachable route below any real one for the same prefix.
const unreachableMetric = "4000"

func ip(ctx context.Context, args ...string) error {
	cmd := exec.CommandContext(ctx, "ip", args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(out.String()))
	}
	return nil
}

// AddUnreachable installs `unreachable PREFIX metric 4000` (already there is no error).
func AddUnreachable(ctx context.Context, prefix netip.Prefix) error {
	err := ip(ctx, "route", "replace", "unreachable", prefix.Masked().String(), "metric", unreachableMetric)
	if err != nil {
		return fmt.Errorf("cni: unreachable route: %w", err)
	}
	return nil
}

// DeleteUnreachable removes the route AddUnreachable installed (absent is no error).
func DeleteUnreachable(ctx context.Context, prefix netip.Prefix) {
	_ = ip(ctx, "route", "del", "unreachable", prefix.Masked().String(), "metric", unreachableMetric)
}

// DeleteBridge removes the bridge (absent is no error).
func DeleteBridge(ctx context.Context, name string) { _ = ip(ctx, "link", "del", name) }
