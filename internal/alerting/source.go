package alerting

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/storage"
)

// instantQuerier evaluates an instant query.
type instantQuerier interface {
	Query(ctx context.Context, expr string, ts time.Time) ([]Sample, error)
}

// localQuerier runs the PromQL engine over a Queryable.
type localQuerier struct {
	engine *promql.Engine
	q      storage.Queryable
}

func (l localQuerier) Query(ctx context.Context, expr string, ts time.Time) ([]Sample, error) {
	qry, err := l.engine.NewInstantQuery(ctx, l.q, nil, expr, ts)
	if err != nil {
		return nil, err
	}
	defer qry.Close()
	res := qry.Exec(ctx)
	if res.Err != nil {
		return nil, res.Err
	}
	switch v := res.Value.(type) {
	case promql.Vector:
		out := make([]Sample, 0, len(v))
		for _, s := range v {
			if s.H != nil {
				continue // native histograms do not make alerts, as in Prometheus
			}
			out = append(out, Sample{Labels: s.Metric, Value: s.F})
		}
		return out, nil
	case promql.Scalar:
		return []Sample{{Labels: labels.EmptyLabels(), Value: v.V}}, nil
	default:
		return nil, fmt.Errorf("rule result is a %s, want an instant vector or scalar", res.Value.Type())
	}
}

// remoteQuerier asks a Prometheus server's HTTP API.
type remoteQuerier struct{ api promv1.API }

func newRemote(base string, c *http.Client) (remoteQuerier, error) {
	cfg := api.Config{Address: base}
	if c != nil {
		cfg.Client = c
	}
	cl, err := api.NewClient(cfg)
	if err != nil {
		return remoteQuerier{}, fmt.Errorf("prometheus %s: %w", redact(base), err)
	}
	return remoteQuerier{api: promv1.NewAPI(cl)}, nil
}

func (r remoteQuerier) Query(ctx context.Context, expr string, ts time.Time) ([]Sample, error) {
	v, _, err := r.api.Query(ctx, expr, ts)
	if err != nil {
		return nil, stripURL(err)
	}
	switch v := v.(type) {
	case model.Vector:
		out := make([]Sample, 0, len(v))
		for _, s := range v {
			b := labels.NewScratchBuilder(len(s.Metric))
			for k, val := range s.Metric {
				b.Add(string(k), string(val))
			}
			b.Sort()
			out = append(out, Sample{Labels: b.Labels(), Value: float64(s.Value)})
		}
		return out, nil
	case *model.Scalar:
		return []Sample{{Labels: labels.EmptyLabels(), Value: float64(v.Value)}}, nil
	default:
		return nil, fmt.Errorf("rule result is a %s, want an instant vector or scalar", v.Type())
	}
}
