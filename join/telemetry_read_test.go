package join

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/inferprobe/inferprobe/artifact"
)

func writeSamples(t *testing.T, samples []artifact.TelemetrySample) []byte {
	t.Helper()
	var b bytes.Buffer
	for _, s := range samples {
		line, err := artifact.MarshalLine(s)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(line)
		b.WriteByte('\n')
	}
	return b.Bytes()
}

func TestReadTelemetry(t *testing.T) {
	good := writeSamples(t, series(0, 200, nil))
	got, err := ReadTelemetry(bytes.NewReader(good))
	if err != nil || len(got) != 3 || *got[2].ValueBytes != 1200 {
		t.Fatalf("got %d samples, err %v", len(got), err)
	}
	first := string(bytes.SplitN(good, []byte("\n"), 2)[0])
	bad := map[string]string{
		"empty":        "",
		"not json":     "{nope\n",
		"float value":  strings.Replace(first, `"value_bytes":1000`, `"value_bytes":1000.0`, 1) + "\n",
		"float time":   strings.Replace(first, `"interval_ms":100`, `"interval_ms":1e2`, 1) + "\n",
		"other kind":   `{"event_type":"infer.session","schema_version":1}` + "\n",
		"valid null":   strings.Replace(first, `"value_bytes":1000`, `"value_bytes":null`, 1) + "\n",
		"wrong scope":  strings.Replace(first, `"scope":"server_process"`, `"scope":"gpu_device"`, 1) + "\n",
		"bad domain":   strings.Replace(first, `hostA/bootA/unix_epoch_ns`, `hostA/unix_epoch_ns`, 1) + "\n",
		"missing key":  strings.Replace(first, `"detail":null,`, ``, 1) + "\n",
		"missing rank": strings.Replace(first, `"rank":null,`, ``, 1) + "\n",
		"unknown key":  strings.Replace(first, `"detail":null,`, `"detail":null,"extra":1,`, 1) + "\n",
		"unknown id":   strings.Replace(first, `"rank":null,`, `"rank":null,"gpu":1,`, 1) + "\n",
		"too long":     `{"event_type":"infer.telemetry_sample","schema_version":1,"source":"` + strings.Repeat("x", MaxTelemetryLineBytes) + `"}` + "\n",
		"truncated":    string(good) + `{"event_type":"infer.tele`,
		"world no grp": strings.Replace(first, `"boot_id":"bootA"`, `"boot_id":"bootA","world_size":2`, 1) + "\n",
	}
	for name, text := range bad {
		t.Run(name, func(t *testing.T) {
			if _, err := ReadTelemetry(strings.NewReader(text)); !errors.Is(err, ErrInvalidTelemetry) {
				t.Fatalf("err = %v", err)
			}
		})
	}
	dir := t.TempDir()
	if _, err := ReadTelemetryFile(filepath.Join(dir, "nope.jsonl")); !errors.Is(err, ErrInvalidTelemetry) || !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing file err = %v", err)
	}
	path := filepath.Join(dir, "server.jsonl")
	if err := os.WriteFile(path, good, 0o600); err != nil {
		t.Fatal(err)
	}
	if got, err := ReadTelemetryFile(path); err != nil || len(got) != 3 {
		t.Fatalf("file: %d %v", len(got), err)
	}
}

func FuzzReadTelemetry(f *testing.F) {
	var b bytes.Buffer
	for _, s := range series(0, 200, nil) {
		line, _ := artifact.MarshalLine(s)
		b.Write(line)
		b.WriteByte('\n')
	}
	f.Add(b.Bytes())
	f.Add([]byte(`{"event_type":"infer.telemetry_sample","schema_version":1}`))
	f.Add([]byte("\n\n{}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		samples, err := ReadTelemetry(bytes.NewReader(data))
		if err != nil {
			if !errors.Is(err, ErrInvalidTelemetry) {
				t.Fatalf("error does not wrap ErrInvalidTelemetry: %v", err)
			}
			return
		}
		// Whatever loads must join without panicking.
		in := input(samples, win("c1", 0, 1000))
		in.Clock.UncertaintyNS = artifact.Ptr(int64(1))
		if _, err := JoinServer(in); err != nil {
			t.Fatalf("join of loaded samples failed: %v", err)
		}
	})
}
