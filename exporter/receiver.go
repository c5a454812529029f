package exporter

import (
	"github.com/prometheus/client_golang/prometheus"
)

// ReceiverCounts are a span receiver's counters as the exporter publishes them: spans
// accepted by transport, spans refused or invalid, spans accepted but never delivered.
type ReceiverCounts struct {
	HTTPProtobuf, HTTPJSON, GRPC int64
	Rejected, Dropped            int64
}

// receiverCollector exposes a span receiver's counters at scrape time.
type receiverCollector struct {
	stats                       func() ReceiverCounts
	received, rejected, dropped *prometheus.Desc
}

// WatchReceiver exposes the counters of the span receiver that stats reads:
// inferprobe_receiver_spans_received_total{transport} (http_protobuf, http_json, grpc),
// inferprobe_receiver_spans_rejected_total (refused or invalid) and
// inferprobe_receiver_spans_dropped_total (accepted but never delivered). Call it once.
func (e *Exporter) WatchReceiver(stats func() ReceiverCounts) {
	e.reg.MustRegister(&receiverCollector{
		stats:    stats,
		received: prometheus.NewDesc("inferprobe_receiver_spans_received_total", "Spans the OTLP receiver accepted, by transport.", []string{"transport"}, nil),
		rejected: prometheus.NewDesc("inferprobe_receiver_spans_rejected_total", "Spans the OTLP receiver refused or found invalid.", nil, nil),
		dropped:  prometheus.NewDesc("inferprobe_receiver_spans_dropped_total", "Spans the OTLP receiver accepted but could not deliver.", nil, nil),
	})
}

func (c *receiverCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.received
	ch <- c.rejected
	ch <- c.dropped
}

func (c *receiverCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.stats()
	for _, t := range []struct {
		name string
		n    int64
	}{{"http_protobuf", s.HTTPProtobuf}, {"http_json", s.HTTPJSON}, {"grpc", s.GRPC}} {
		ch <- prometheus.MustNewConstMetric(c.received, prometheus.CounterValue, float64(t.n), t.name)
	}
	ch <- prometheus.MustNewConstMetric(c.rejected, prometheus.CounterValue, float64(s.Rejected))
	ch <- prometheus.MustNewConstMetric(c.dropped, prometheus.CounterValue, float64(s.Dropped))
}

// WatchReload exposes the configuration reload state the way Prometheus and Alertmanager do:
// inferprobe_config_last_reload_successful (1 or 0) and
// inferprobe_config_last_reload_success_timestamp_seconds (Unix seconds). Call it once.
func (e *Exporter) WatchReload(ok func() bool, lastSuccess func() float64) {
	e.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "inferprobe_config_last_reload_successful", Help: "Whether the last configuration reload attempt was successful.",
	}, func() float64 {
		if ok() {
			return 1
		}
		return 0
	}))
	e.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "inferprobe_config_last_reload_success_timestamp_seconds", Help: "Timestamp of the last successful configuration load or reload, Unix seconds.",
	}, lastSuccess))
}
