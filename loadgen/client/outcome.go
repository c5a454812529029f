package client

// Outcome is a request's status in the artifact (infer.request "status"): one of the classes
// below, each saying how far the request got and whether the server may have seen it.
type Outcome string

// The outcome classes. Do returns every class except Dropped, which the load generator
// records for arrivals it never sends.
const (
	// OK: the request completed with output: a 2xx response whose stream ended with [DONE]
	// or a finish_reason (or a complete non-streaming JSON body with choices), and carried
	// content, reasoning or a tool call (else it is an Error, ErrTypeNoContent).
	OK Outcome = "ok"
	// Timeout: the per-call timeout elapsed after the connection was made, while waiting for
	// or reading the response.
	Timeout Outcome = "timeout"
	// Rejected: the server answered HTTP 429 or 503 (HTTPStatus says which).
	Rejected Outcome = "rejected"
	// Unreachable: no connection was made, so nothing was sent: connection refused, DNS
	// failure, a connect timeout, or a TLS handshake failure. The server never saw the request.
	Unreachable Outcome = "unreachable"
	// DeliveryUnknown: the connection was made, but writing the request failed, or the server
	// reset or closed the connection before a status line. The server may or may not have
	// received the request.
	DeliveryUnknown Outcome = "delivery_unknown"
	// Error: any other failure: another HTTP status (with HTTPStatus; redirects are never
	// followed, so a 3xx is an error), an error object inside a 2xx answer, a truncated or
	// undecodable stream, an over-long line, a complete answer without output.
	Error Outcome = "error"
	// Dropped: never sent (the load generator's overflow policy or drain deadline).
	Dropped Outcome = "dropped"
	// Cancelled: the caller stopped waiting (its context was cancelled: drain deadline,
	// Ctrl+C) before the request finished.
	Cancelled Outcome = "cancelled"
)

// ErrorType values in Result.ErrorType: a stable, small vocabulary that says which failure
// path produced the outcome. ErrorMessage carries the detail.
const (
	ErrTypeConnect         = "connect"          // Unreachable: dial, DNS or TLS handshake failed
	ErrTypeConnectTimeout  = "connect_timeout"  // Unreachable: the call's timeout elapsed before a connection
	ErrTypeSendFailed      = "send_failed"      // DeliveryUnknown: writing the request failed
	ErrTypeNoResponse      = "no_response"      // DeliveryUnknown: closed or reset before a status line
	ErrTypeBadResponse     = "bad_response"     // Error: the server sent bytes that are not an HTTP/1.x response
	ErrTypeTimeout         = "timeout"          // Timeout
	ErrTypeCancelled       = "cancelled"        // Cancelled
	ErrTypeRejected        = "rejected"         // Rejected (429/503)
	ErrTypeHTTPStatus      = "http_status"      // Error: a non-2xx, non-3xx status other than 429/503
	ErrTypeRedirect        = "redirect"         // Error: a 3xx status (not followed)
	ErrTypeStreamError     = "stream_error"     // Error: an {"error":…} object (or "event: error") inside a 2xx stream
	ErrTypeResponseError   = "response_error"   // Error: an {"error":…} object as a 2xx JSON body
	ErrTypeTruncated       = "truncated"        // Error: the stream ended without finish_reason and without [DONE]
	ErrTypeInvalidJSON     = "invalid_json"     // Error: a data event or JSON body that does not decode
	ErrTypeInvalidResponse = "invalid_response" // Error: a 2xx JSON body without choices
	ErrTypeNoContent       = "no_content"       // Error: a complete 2xx answer without content, reasoning or tool calls
	ErrTypeLineTooLong     = "line_too_long"    // Error: an SSE line or event over Options.MaxLineBytes
	ErrTypeBodyTooLarge    = "body_too_large"   // Error: a JSON body over Options.MaxLineBytes
	ErrTypeEncoding        = "content_encoding" // Error: a compressed body although none was asked for
	ErrTypeInvalidRequest  = "invalid_request"  // Error: the request could not be built (bad URL); nothing sent
)
