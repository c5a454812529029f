package shard

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
)

// FuzzRegister posts arbitrary bodies to /v1/register: never a panic, always 200, 400 or
// 409 with a JSON answer, and at most Shards registrations.
func FuzzRegister(f *testing.F) {
	f.Add([]byte(`{"shard":0,"shards":2,"run_id":"r","workload_digest":"d"}`))
	f.Add([]byte(`{"shard":-1,"shards":2,"run_id":"r","workload_digest":"d"}`))
	f.Add([]byte(`{"shard":1e99}`))
	f.Add([]byte(`{"shard":0,"extra":1}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, body []byte) {
		c, err := NewCoordinator(Options{Shards: 2, Clock: clockwork.NewFakeClockAt(time.Unix(0, 0))})
		if err != nil {
			t.Fatal(err)
		}
		h := c.Handler()
		for i := 0; i < 2; i++ {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v1/register", bytes.NewReader(body)))
			switch rec.Code {
			case http.StatusOK, http.StatusBadRequest, http.StatusConflict:
			default:
				t.Fatalf("status %d", rec.Code)
			}
			if !bytes.HasPrefix(rec.Body.Bytes(), []byte("{")) {
				t.Fatalf("answer %q", rec.Body.String())
			}
		}
		if n := len(c.Registered()); n > 1 {
			t.Fatalf("one body registered %d shards", n)
		}
	})
}
