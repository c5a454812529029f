package receiver

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/inferprobe/inferprobe/artifact"
	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	_ "google.golang.org/grpc/encoding/gzip" // gzip-compressed gRPC exports (OTEL_EXPORTER_OTLP_COMPRESSION=gzip)
	encproto "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/tap"
)

// grpcServerOptions are the options of the gRPC server New creates: the
// raw codec (the receiver decodes exports itself, after its pre-scan and
// memory charge), MaxRecvMsgSize = MaxBodyBytes (gRPC answers
// ResourceExhausted beyond, after decompression; the Collector's default is
// 4 MiB), 2×MaxConcurrentExports streams per connection, and the tap that
// refuses an export before its message is read (tap).
func (r *Receiver) grpcServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.ForceServerCodecV2(rawCodec{}),
		grpc.InTapHandle(r.tap),
		grpc.MaxRecvMsgSize(int(min(r.opts.MaxBodyBytes, 1<<31-1))),
		grpc.MaxConcurrentStreams(uint32(2 * r.opts.MaxConcurrentExports)),
	}
}

// RegisterGRPC registers the receiver's OTLP TraceService on s (New already
// registers it on the gRPC server Listen uses). s must have been created
// with GRPCServerOptions: the service reads each export's bytes itself.
func (r *Receiver) RegisterGRPC(s *grpc.Server) {
	s.RegisterService(&traceServiceDesc, &grpcService{r: r})
}

// GRPCServerOptions returns the server options RegisterGRPC needs (the
// receiver's codec and message limits).
func (r *Receiver) GRPCServerOptions() []grpc.ServerOption { return r.grpcServerOptions() }

// traceServiceDesc is opentelemetry.proto.collector.trace.v1.TraceService
// with a handler that takes the request's bytes undecoded (rawExport).
var traceServiceDesc = grpc.ServiceDesc{
	ServiceName: "opentelemetry.proto.collector.trace.v1.TraceService",
	HandlerType: (*any)(nil),
	Methods: []grpc.MethodDesc{{
		MethodName: "Export",
		Handler: func(srv any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
			var in rawExport
			if err := dec(&in); err != nil {
				return nil, err
			}
			defer in.free()
			return srv.(*grpcService).export(ctx, in.body)
		},
	}},
	Metadata: "opentelemetry/proto/collector/trace/v1/trace_service.proto",
}

// rawExport is a gRPC request message kept as its bytes: body is valid
// until free.
type rawExport struct {
	data mem.BufferSlice // the message as gRPC holds it, referenced
	buf  mem.Buffer      // or one pooled copy of it
	body []byte
}

func (m *rawExport) free() {
	if m.data != nil {
		m.data.Free()
		m.data = nil
	}
	if m.buf != nil {
		m.buf.Free()
		m.buf = nil
	}
	m.body = nil
}

// rawResponse is a gRPC response message already encoded.
type rawResponse []byte

// rawCodec is the server codec: a *rawExport takes the message bytes
// (without a copy when gRPC holds them in one buffer, else one copy into a
// buffer of gRPC's pool, as its protobuf codec does), a rawResponse is sent
// as it is, and any other message goes through gRPC's protobuf codec.
type rawCodec struct{}

func (rawCodec) Name() string { return encproto.Name }

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	if b, ok := v.(rawResponse); ok {
		return mem.BufferSlice{mem.SliceBuffer(b)}, nil
	}
	return encoding.GetCodecV2(encproto.Name).Marshal(v)
}

func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	m, ok := v.(*rawExport)
	if !ok {
		return encoding.GetCodecV2(encproto.Name).Unmarshal(data, v)
	}
	if len(data) == 1 {
		data.Ref()
		m.data = data
		m.body = data[0].ReadOnlyData()
		return nil
	}
	m.buf = data.MaterializeToBuffer(mem.DefaultBufferPool())
	m.body = m.buf.ReadOnlyData()
	return nil
}

// tap runs when a gRPC stream opens, before its message is read (on the
// gRPC listener; not for gRPC served through the HTTP port): while the
// receiver is stopping, the queue is near full, or every export slot is
// taken, the export is refused there, with the answer the handler would
// give (Unavailable or ResourceExhausted with RetryInfo), so that a flood
// costs no message reads. A stream let through takes its export slot here
// (a tapSlot in its context), so that at most MaxConcurrentExports messages
// are being read at once; the slot is freed when the handler returns, or
// when the stream ends without reaching it.
func (r *Receiver) tap(ctx context.Context, _ *tap.Info) (context.Context, error) {
	ref := r.checkStopping()
	if ref == nil {
		if err := r.q.admit(0); err != nil {
			ref = r.refuse(outcomeQueueFull, err.Error())
		}
	}
	if ref == nil {
		select {
		case r.slots <- struct{}{}:
		default:
			ref = r.refuse(outcomeBusy, fmt.Sprintf("%d exports are already being decoded; retry later", cap(r.slots)))
		}
	}
	if ref != nil {
		r.c.grpcRequests.Add(1)
		return ctx, r.grpcError(ref)
	}
	slot := &tapSlot{r: r}
	context.AfterFunc(ctx, slot.release)
	return context.WithValue(ctx, tapSlotKey{}, slot), nil
}

// tapSlot is the export slot the tap took for one gRPC stream.
type tapSlot struct {
	r    *Receiver
	done atomic.Bool
}

// release frees the slot; only the first call does.
func (s *tapSlot) release() {
	if s.done.CompareAndSwap(false, true) {
		s.r.leave()
	}
}

// tapSlotKey is the context key of a stream's *tapSlot.
type tapSlotKey struct{}

// enterGRPC admits one gRPC export of wire bytes to be decoded: with the
// slot the tap took for its stream (then only the queue is checked again),
// or as enter decides; either way the queue is asked for the charge the
// message implies (3 bytes per byte, as for an HTTP body of known length),
// so that an export that cannot fit is refused before it is decoded.
// release frees the slot.
func (r *Receiver) enterGRPC(ctx context.Context, wire int) (release func(), ref *refusal) {
	expect := 3 * int64(wire)
	if slot, ok := ctx.Value(tapSlotKey{}).(*tapSlot); ok {
		if err := r.q.admit(expect); err != nil {
			slot.release()
			return nil, r.refuse(outcomeQueueFull, err.Error())
		}
		return slot.release, nil
	}
	if ref := r.enter(expect); ref != nil {
		return nil, ref
	}
	return r.leave, nil
}

// emptyExportResponse is the encoded ExportTraceServiceResponse of an
// export accepted whole, as the full path answers it.
var emptyExportResponse, _ = exportResponse(conversion{}).MarshalProto()

// grpcService is the OTLP gRPC TraceService of a Receiver.
type grpcService struct {
	r *Receiver
}

// export handles one gRPC export: the answers of the outcomes table, an
// encoded ExportTraceServiceResponse (partial_success when spans were
// rejected) for an accepted export, a status error with the outcome's code
// (and RetryInfo when retryable) for a refused one. The message (already
// read by gRPC, at most MaxRecvMsgSize) is charged on the memory limiter,
// pre-scanned and only then decoded.
func (g *grpcService) export(ctx context.Context, body []byte) (any, error) {
	r := g.r
	r.c.grpcRequests.Add(1)
	if ref := r.checkStopping(); ref != nil {
		return nil, r.grpcError(ref)
	}
	release, ref := r.enterGRPC(ctx, len(body))
	if ref != nil {
		return nil, r.grpcError(ref)
	}
	defer release()
	res := reservation{l: &r.mem}
	defer res.release()
	if err := res.grow(int64(len(body))); err != nil {
		return nil, r.grpcError(r.refuse(outcomeMemory, err.Error()))
	}
	if r.skipUnwanted(body, &r.c.spansGRPC) {
		return rawResponse(emptyExportResponse), nil
	}
	host := ""
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		host = peerHost(p.Addr.String())
	}
	conv, ref := r.decodeExport(body, formatProtobuf, &res, artifact.SpanSourceGRPC, host)
	if ref != nil {
		return nil, r.grpcError(ref)
	}
	conv, ref = r.accept(conv, len(body))
	if ref != nil {
		return nil, r.grpcError(ref)
	}
	r.c.spansGRPC.Add(int64(len(conv.records)))
	out, err := exportResponse(conv).MarshalProto()
	if err != nil { // cannot happen for a response message
		return nil, fmt.Errorf("receiver: encoding the export response: %w", err)
	}
	return rawResponse(out), nil
}
