package alerting

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/prometheus/common/model"
)

// Notification is what a receiver is told after an evaluation: the rule's alerts that
// started firing or resolved (Changed), and all of its alerts still firing or recently
// resolved (Alerts), at Now.
type Notification struct {
	Rule *Rule
	// Alerts are the rule's firing alerts and those that resolved this round.
	Alerts []Alert
	// Resend is true when nothing changed and the firing alerts are sent again.
	Resend bool
	Now    time.Time
	// EndsAt is the endsAt of firing alerts for receivers that expire them (Alertmanager).
	EndsAt time.Time
}

// Notifier is a receiver.
type Notifier interface {
	// Notify delivers n; an error is logged, counted and reported in the rule's status.
	Notify(ctx context.Context, n Notification) error
	// Name names the receiver in logs and errors (no credentials); Type is its kind for
	// metrics (ReceiverWebhook, ReceiverAlertmanager, ReceiverEvents).
	Name() string
	Type() string
	// WantsResend reports whether firing alerts should be re-sent while they fire.
	WantsResend() bool
}

// WebhookMessage is Alertmanager's webhook payload, version 4.
type WebhookMessage struct {
	Version           string            `json:"version"`
	GroupKey          string            `json:"groupKey"`
	TruncatedAlerts   int               `json:"truncatedAlerts"`
	Status            string            `json:"status"`
	Receiver          string            `json:"receiver"`
	GroupLabels       map[string]string `json:"groupLabels"`
	CommonLabels      map[string]string `json:"commonLabels"`
	CommonAnnotations map[string]string `json:"commonAnnotations"`
	ExternalURL       string            `json:"externalURL"`
	Alerts            []WebhookAlert    `json:"alerts"`
}

// WebhookAlert is one alert of a WebhookMessage.
type WebhookAlert struct {
	Status       string            `json:"status"`
	Labels       map[string]string `json:"labels"`
	Annotations  map[string]string `json:"annotations"`
	StartsAt     time.Time         `json:"startsAt"`
	EndsAt       time.Time         `json:"endsAt"`
	GeneratorURL string            `json:"generatorURL"`
	Fingerprint  string            `json:"fingerprint"`
}

// Fingerprint is Alertmanager's fingerprint of an alert's labels (16 hex digits).
func Fingerprint(lbls map[string]string) string {
	ls := make(model.LabelSet, len(lbls))
	for k, v := range lbls {
		ls[model.LabelName(k)] = model.LabelValue(v)
	}
	return ls.Fingerprint().String()
}

// BuildWebhook renders n as Alertmanager renders a group for its webhook receiver: one group
// per rule (grouped by alertname), status firing while any alert fires.
func BuildWebhook(n Notification, receiver, externalURL string) WebhookMessage {
	msg := WebhookMessage{Version: "4", Status: "resolved", Receiver: receiver, ExternalURL: externalURL,
		GroupLabels: map[string]string{LabelAlertName: n.Rule.Name}}
	msg.GroupKey = fmt.Sprintf("{}:{alertname=%q}", n.Rule.Name)
	for i, a := range n.Alerts {
		wa := WebhookAlert{Status: "resolved", Labels: a.Labels.Map(), Annotations: a.Annotations, StartsAt: a.ActiveAt,
			EndsAt: a.ResolvedAt, GeneratorURL: n.Rule.GeneratorURL}
		if wa.Annotations == nil {
			wa.Annotations = map[string]string{}
		}
		if a.State == StateFiring {
			wa.Status, wa.EndsAt, msg.Status = "firing", time.Time{}, "firing"
		}
		wa.Fingerprint = Fingerprint(wa.Labels)
		msg.Alerts = append(msg.Alerts, wa)
		if i == 0 {
			msg.CommonLabels, msg.CommonAnnotations = maps.Clone(wa.Labels), maps.Clone(wa.Annotations)
			continue
		}
		intersect(msg.CommonLabels, wa.Labels)
		intersect(msg.CommonAnnotations, wa.Annotations)
	}
	if msg.CommonLabels == nil {
		msg.CommonLabels, msg.CommonAnnotations = map[string]string{}, map[string]string{}
	}
	return msg
}

func intersect(common, m map[string]string) {
	for k, v := range common {
		if m[k] != v {
			delete(common, k)
		}
	}
}

// Webhook POSTs Alertmanager's webhook payload (version 4) to URL.
type Webhook struct {
	URL string
	// Receiver names the receiver in the payload (default "webhook").
	Receiver    string
	ExternalURL string
	Client      *http.Client
}

var _ Notifier = (*Webhook)(nil)

func (w *Webhook) Name() string      { return "webhook " + redact(w.URL) }
func (w *Webhook) Type() string      { return ReceiverWebhook }
func (w *Webhook) WantsResend() bool { return false }

// Notify posts the payload; a status other than 2xx is an error.
func (w *Webhook) Notify(ctx context.Context, n Notification) error {
	recv := w.Receiver
	if recv == "" {
		recv = "webhook"
	}
	return post(ctx, w.Client, w.URL, BuildWebhook(n, recv, w.ExternalURL))
}

// PostableAlert is one alert of Alertmanager's POST /api/v2/alerts body.
type PostableAlert struct {
	Labels       map[string]string `json:"labels"`
	Annotations  map[string]string `json:"annotations,omitempty"`
	StartsAt     time.Time         `json:"startsAt"`
	EndsAt       time.Time         `json:"endsAt"`
	GeneratorURL string            `json:"generatorURL,omitempty"`
}

// BuildPostable renders n as Prometheus sends alerts to Alertmanager: firing alerts end at
// n.EndsAt (Alertmanager resolves them if they are not re-sent), resolved ones at their
// resolution.
func BuildPostable(n Notification) []PostableAlert {
	out := make([]PostableAlert, 0, len(n.Alerts))
	for _, a := range n.Alerts {
		pa := PostableAlert{Labels: a.Labels.Map(), Annotations: a.Annotations, StartsAt: a.ActiveAt, EndsAt: a.ResolvedAt,
			GeneratorURL: n.Rule.GeneratorURL}
		if a.State == StateFiring {
			pa.EndsAt = n.EndsAt
		}
		out = append(out, pa)
	}
	return out
}

// Alertmanager POSTs alerts to an Alertmanager's /api/v2/alerts.
type Alertmanager struct {
	// URL is the Alertmanager's base URL (http://host:9093).
	URL    string
	Client *http.Client
}

var _ Notifier = (*Alertmanager)(nil)

func (a *Alertmanager) Name() string      { return "alertmanager " + redact(a.URL) }
func (a *Alertmanager) Type() string      { return ReceiverAlertmanager }
func (a *Alertmanager) WantsResend() bool { return true }

// Notify posts the alerts.
func (a *Alertmanager) Notify(ctx context.Context, n Notification) error {
	return post(ctx, a.Client, strings.TrimSuffix(a.URL, "/")+"/api/v2/alerts", BuildPostable(n))
}

func post(ctx context.Context, c *http.Client, target string, body any) error {
	if c == nil {
		c = http.DefaultClient
	}
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(b))
	if err != nil {
		return fmt.Errorf("%s: %w", redact(target), err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return fmt.Errorf("post %s: %w", redact(target), stripURL(err))
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("post %s: %s: %s", redact(target), resp.Status, strings.TrimSpace(string(msg)))
	}
	return nil
}

// redact hides a URL's password and query (tokens) for errors, logs and status.
func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	if u.RawQuery != "" {
		u.RawQuery = "redacted"
	}
	return u.Redacted()
}

// stripURL drops the URL a *url.Error repeats (it may carry credentials).
func stripURL(err error) error {
	if ue, ok := err.(*url.Error); ok {
		return fmt.Errorf("%s: %w", ue.Op, ue.Err)
	}
	return err
}
