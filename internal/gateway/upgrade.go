package gateway

import (
	"log/slog"
	"net/http"
	"net/http/httputil"
)

// newUpgradeProxy is the ReverseProxy of the requests that switch protocols (WebSocket,
// h2c): it hijacks both connections and copies bytes both ways, which the gateway's own
// core (forward) does not do. The exchange in the request's context says where each
// request goes.
func (g *Gateway) newUpgradeProxy() *httputil.ReverseProxy {
	return &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme = "http"
			if ex := exchangeOf(pr.In.Context()); ex != nil && len(ex.target.Addrs) > 0 {
				addrs := ex.target.Addrs
				ex.start = ex.target.next.Add(1)
				pr.Out.URL.Host = addrs[ex.start%uint64(len(addrs))]
				if ex.rule.Retries > 0 && pr.Out.Body != nil && pr.Out.Body != http.NoBody {
					ex.body = &replayBody{rc: pr.Out.Body}
					pr.Out.Body = ex.body
				}
			}
			pr.SetXForwarded()
		},
		Transport: upgradeTransport{g},
		ModifyResponse: func(resp *http.Response) error {
			if ex := exchangeOf(resp.Request.Context()); ex != nil {
				for _, m := range ex.rule.respMods {
					modifyHeaders(resp.Header, m)
				}
			}
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			g.upstreamError(w, r, exchangeOf(r.Context()), err)
		},
		ErrorLog:   slog.NewLogLogger(g.log.Handler(), slog.LevelDebug),
		BufferPool: bufferPool{},
	}
}

// upgradeTransport sends the upgrade proxy's requests through the gateway's round trip
// (its endpoints, retries and Transport).
type upgradeTransport struct{ g *Gateway }

func (t upgradeTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	return t.g.roundTrip(req, exchangeOf(req.Context()))
}
