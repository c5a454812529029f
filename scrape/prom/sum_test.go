package prom

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestScraperSum(t *testing.T) {
	body := `# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m"} 3
vllm:num_requests_running{engine="1",model_name="m"} 4.5
# TYPE vllm:e2e_request_latency_seconds histogram
vllm:e2e_request_latency_seconds_bucket{le="1"} 1
vllm:e2e_request_latency_seconds_bucket{le="+Inf"} 2
vllm:e2e_request_latency_seconds_sum 3
vllm:e2e_request_latency_seconds_count 2
`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte(body)) }))
	defer srv.Close()
	s, err := NewScraper(Config{URL: srv.URL + "/metrics", Endpoint: srv.URL + "/v1/chat/completions"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if v, err := s.Sum(ctx, "vllm:num_requests_running"); err != nil || v != 7.5 {
		t.Fatalf("sum %v, %v", v, err)
	}
	if _, err := s.Sum(ctx, "vllm:num_requests_waiting"); err == nil || !strings.Contains(err.Error(), "no vllm:num_requests_waiting") {
		t.Fatalf("missing family: %v", err)
	}
	if _, err := s.Sum(ctx, "vllm:e2e_request_latency_seconds"); err == nil || !strings.Contains(err.Error(), "not a gauge or counter") {
		t.Fatalf("histogram: %v", err)
	}
	srv.Close()
	if _, err := s.Sum(ctx, "vllm:num_requests_running"); err == nil {
		t.Fatal("a closed server summed")
	}
}
