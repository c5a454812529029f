package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
)

// sender sends one export and returns its answer as an HTTP status: for gRPC, OK is 200,
// ResourceExhausted 429, Unavailable 503 and any other code 1000+code; err is a transport
// error (no answer).
type sender func() (int, error)

// httpSender posts b as an OTLP/HTTP protobuf export to url.
func httpSender(client *http.Client, url string, b []byte) sender {
	return func() (int, error) { return send(client, url, b) }
}

func send(client *http.Client, url string, b []byte) (int, error) {
	return post(client, url, b, "application/x-protobuf", "")
}

// post sends body to url with the content type (and content encoding, unless ""), reads and
// drops the answer's body and returns its status code.
func post(client *http.Client, url string, body []byte, contentType, encoding string) (int, error) {
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", contentType)
	if encoding != "" {
		req.Header.Set("Content-Encoding", encoding)
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}

// grpcConns is the number of gRPC connections a flood's senders share, round robin.
const grpcConns = 32

// grpcSenders dials conns connections to addr and returns a sender exporting b (an encoded
// ExportTraceServiceRequest) over them in turn, and a close for the connections.
func grpcSenders(addr string, conns int, b []byte) (sender, func(), error) {
	ccs := make([]*grpc.ClientConn, 0, conns)
	closeAll := func() {
		for _, cc := range ccs {
			_ = cc.Close()
		}
	}
	for i := 0; i < conns; i++ {
		cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithDefaultCallOptions(grpc.ForceCodecV2(bytesCodec{}), grpc.MaxCallRecvMsgSize(64<<20)))
		if err != nil {
			closeAll()
			return nil, nil, err
		}
		ccs = append(ccs, cc)
	}
	var next atomic.Uint64
	send := func() (int, error) {
		cc := ccs[next.Add(1)%uint64(len(ccs))]
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		var out []byte
		err := cc.Invoke(ctx, "/opentelemetry.proto.collector.trace.v1.TraceService/Export", b, &out)
		switch status.Code(err) {
		case codes.OK:
			return 200, nil
		case codes.ResourceExhausted:
			return 429, nil
		case codes.Unavailable: // the receiver's answer carries RetryInfo; the client's own connection error does not
			if st, _ := status.FromError(err); len(st.Details()) == 0 {
				return 0, err
			}
			return 503, nil
		case codes.DeadlineExceeded:
			return 0, err
		default:
			return 1000 + int(status.Code(err)), nil
		}
	}
	return send, closeAll, nil
}

// bytesCodec sends a []byte as the message as it is and takes an answer into a *[]byte.
type bytesCodec struct{}

func (bytesCodec) Name() string { return "proto" }

func (bytesCodec) Marshal(v any) (mem.BufferSlice, error) {
	b, ok := v.([]byte)
	if !ok {
		return nil, fmt.Errorf("bytesCodec: cannot send %T", v)
	}
	return mem.BufferSlice{mem.SliceBuffer(b)}, nil
}

func (bytesCodec) Unmarshal(data mem.BufferSlice, v any) error {
	p, ok := v.(*[]byte)
	if !ok {
		return fmt.Errorf("bytesCodec: cannot receive into %T", v)
	}
	*p = data.Materialize()
	return nil
}

// answers counts the answers of a flood by status.
type answers struct {
	mu       sync.Mutex
	byStatus map[int]int
	errors   int
	errText  string
}

func (a *answers) add(code int, err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if err != nil {
		a.errors++
		if a.errText == "" {
			a.errText = err.Error()
		}
		return
	}
	a.byStatus[code]++
}

func others(m map[int]int) map[int]int {
	o := map[int]int{}
	for k, v := range m {
		if k != 200 && k != 429 && k != 503 {
			o[k] = v
		}
	}
	return o
}
