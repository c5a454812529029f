package receiver

import (
	"context"

	"github.com/inferprobe/inferprobe/artifact"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"google.golang.org/grpc"
	_ "google.golang.org/grpc/encoding/gzip" // gzip-compressed gRPC exports (OTEL_EXPORTER_OTLP_COMPRESSION=gzip)
	"google.golang.org/grpc/peer"
)

// RegisterGRPC registers the receiver's OTLP TraceService on s (New already
// registers it on the gRPC server Listen uses).
func (r *Receiver) RegisterGRPC(s *grpc.Server) {
	ptraceotlp.RegisterGRPCServer(s, &grpcService{r: r})
}

// grpcService is the OTLP gRPC TraceService of a Receiver.
type grpcService struct {
	ptraceotlp.UnimplementedGRPCServer
	r *Receiver
}

// Export handles one gRPC export: the answers of the outcomes table, an
// ExportTraceServiceResponse (partial_success when spans were rejected) for
// an accepted export, a status error with the outcome's code (and RetryInfo
// when retryable) for a refused one.
func (g *grpcService) Export(ctx context.Context, req ptraceotlp.ExportRequest) (ptraceotlp.ExportResponse, error) {
	r := g.r
	r.c.grpcRequests.Add(1)
	if ref := r.checkStopping(); ref != nil {
		return ptraceotlp.ExportResponse{}, r.grpcError(ref)
	}
	if ref := r.enter(0); ref != nil {
		return ptraceotlp.ExportResponse{}, r.grpcError(ref)
	}
	defer r.leave()
	host := ""
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		host = peerHost(p.Addr.String())
	}
	td := req.Traces()
	var sizer ptrace.ProtoMarshaler
	conv, ref := r.accept(td, artifact.SpanSourceGRPC, host, sizer.TracesSize(td))
	if ref != nil {
		return ptraceotlp.ExportResponse{}, r.grpcError(ref)
	}
	r.c.spansGRPC.Add(int64(len(conv.records)))
	return exportResponse(conv), nil
}
