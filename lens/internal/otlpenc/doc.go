// Package otlpenc maps lens's ended spans to the OTLP trace protobuf, for
// the official OTLP trace clients (gRPC and HTTP) to send.
//
// Why not the SDK's OTLP exporter: it takes only the SDK's read-only spans,
// so every lens span would first be copied into one, and its mapping builds
// about twenty small protobuf objects per span that are garbage once the
// request is sent. On a server busy with requests the export goroutines
// get little CPU, and under the `all` preset that cost decided whether the
// exporter kept up or spans were dropped. An Encoder maps lens spans
// directly and keeps the protobuf objects of one export for the next: the
// clients marshal a request before UploadTraces returns and keep nothing
// of it. The mapping is the OTLP specification's, field for field what the
// SDK exporter sends (the tests hold the two side by side), plus the trace
// state of links, which the SDK exporter leaves out, and one repair: text
// that is not valid UTF-8 is sent with U+FFFD in place of the bad bytes,
// where the SDK exporter fails the whole batch (protobuf will not marshal
// such a string).
package otlpenc
