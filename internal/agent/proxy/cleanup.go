package proxy

import (
	"context"
	"fmt"
	"net/netip"

	"github.com/google/nftables"
)

// Cleanup removes what Run put on the node for table and the Service CIDR serviceCIDR: the
// nftables table (with all its chains, maps and sets), the Service CIDR's unreachable route
// and the per-ClusterIP routes, and turns route_localnet off again on the pod bridge the
// table's loopback guard names (Options.APIServer; loopback.go). Absent things are no
// error; serviceCIDR may be "".
func Cleanup(ctx context.Context, table, serviceCIDR string) error {
	var errs []error
	if c, err := nftables.New(); err == nil {
		if t, err := c.ListTableOfFamily(table, nftables.TableFamilyIPv4); err == nil && t != nil {
			// route_localnet off before its guard goes.
			if bridge := guardedBridge(c, t); bridge != "" {
				if _, err := setRouteLocalnet(bridge, false); err != nil {
					errs = append(errs, err)
				}
			}
			c.DelTable(t)
			if err := c.Flush(); err != nil {
				errs = append(errs, fmt.Errorf("proxy: delete table %s: %w", table, err))
			}
		}
	}
	if p, err := netip.ParsePrefix(serviceCIDR); err == nil {
		if err := deleteRoutes(p); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return errs[0]
	}
	return nil
}
