// Package kineto imports torch-profiler (Kineto) Chrome traces — the
// `*.pt.trace.json[.gz]` files a vLLM or SGLang worker writes — into artifact records:
// one artifact.Iteration per engine step, artifact.ActivityRef records tying the GPU work
// of each CPU launch (or each kernel) to its step, and one artifact.Capabilities record
// per file with its Summary.
//
// Reading is streaming: a hand-written scanner walks the traceEvents array in a sliding
// buffer (64 KiB growing to 2 MiB; one event may take up to Options.MaxEventBytes) and
// keeps a compact struct per GPU activity (48 bytes), CPU launch (40 bytes) and ac2g flow
// end (16 bytes); every other event is validated and dropped. Events are unsorted in the
// file, so attribution runs after the read, over these structs: memory grows with the
// number of GPU activities and launches (about 90 bytes per activity and 45 per launch
// with the indices of the attribution: 1.26 M kernels and 1.22 M launches ≈ 170 MB), never
// with the rest of the file (names, args, CPU ops, Python frames). Gzip is recognised by
// its magic bytes; the decompressed stream is cut at Options.MaxDecompressedBytes.
//
// Attribution: a GPU activity is tied to its CPU launch through its ac2g flow (the flow
// end at the activity's (pid, tid, ts), the flow start of the same id at the launch's),
// else through args.correlation; the launch belongs to the one iteration range of its
// thread that holds its start. Iteration ranges are vLLM's
// execute_context_{nc}({nct})_generation_{ng}({ngt}), SGLang's step[EXTEND bs=… toks=…] /
// step[DECODE bs=…], and inferprobe.iteration/<producer>/<id> or
// stormlog.iteration/<producer>/<id> ranges, from user_annotation events (or from
// gpu_user_annotation events by GPU time when a trace has no CPU ones). Step figures are
// defined on artifact.Iteration.
//
// Import (many files into a Sink) and ImportFile (one file into a callback) are what the
// import-trace command and the run pipeline call.
package kineto
