package analyze

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestFailureReasonsKeepServerErrors: errors the server sent with the same message but a
// different type or code are distinct reasons; each reason carries the server's type and
// code (null when it sent none) in the JSON report, and the text report names them.
func TestFailureReasonsKeepServerErrors(t *testing.T) {
	records := []rec{sessionRec("running"), requestRec(9, "ok")}
	streamErr := func(i int, typ, code any) rec {
		return requestRec(i, "error", "http_status", 200, "error_type", "stream_error", "error_message", "error object in the stream: engine failure",
			"server_error_type", typ, "server_error_code", code)
	}
	for i := range 3 {
		records = append(records, streamErr(i, "InternalServerError", "500"))
	}
	records = append(records, streamErr(3, "server_error", "500"), streamErr(4, "InternalServerError", nil), streamErr(5, nil, nil),
		requestRec(6, "error", "http_status", 200, "error_type", "no_content",
			"error_message", "the answer completed without content, reasoning or tool calls (finish_reason stop)"))
	r, js, txt := analyzeRecs(t, Options{}, records...)
	fr := r.Summary.FailureReasons
	if len(fr) != 5 || fr[0].Count != 3 || fr[0].ServerErrorType == nil || *fr[0].ServerErrorType != "InternalServerError" ||
		fr[0].ServerErrorCode == nil || *fr[0].ServerErrorCode != "500" {
		t.Fatalf("failure reasons %+v", fr)
	}
	for _, want := range []string{
		"  3× error, HTTP 200, stream_error (InternalServerError, code 500): error object in the stream: engine failure\n",
		"  1× error, HTTP 200, stream_error (server_error, code 500): error object in the stream: engine failure\n",
		"  1× error, HTTP 200, stream_error (InternalServerError): error object in the stream: engine failure\n",
		"  1× error, HTTP 200, stream_error: error object in the stream: engine failure\n",
		"  1× error, HTTP 200, no_content: the answer completed without content, reasoning or tool calls (finish_reason stop)\n",
	} {
		if !strings.Contains(txt, want) {
			t.Errorf("text report lacks %q:\n%s", want, txt)
		}
	}
	var doc struct {
		Summary struct {
			FailureReasons []map[string]any `json:"failure_reasons"`
		} `json:"summary"`
	}
	if err := json.Unmarshal([]byte(js), &doc); err != nil {
		t.Fatal(err)
	}
	first := doc.Summary.FailureReasons[0]
	if first["server_error_type"] != "InternalServerError" || first["server_error_code"] != "500" || first["count"] != 3.0 {
		t.Errorf("JSON reason %v", first)
	}
	for _, fr := range doc.Summary.FailureReasons {
		if fr["error_type"] != "no_content" {
			continue
		}
		if v, ok := fr["server_error_type"]; !ok || v != nil {
			t.Errorf("a reason without a server error keeps server_error_type null: %v", fr)
		}
	}
}
